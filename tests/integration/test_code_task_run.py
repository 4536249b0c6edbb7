"""``rlscale run task=code`` trains the embedded tiny model on the code task: the run ends done, its samples are
the task's prompts scored by running their answers in the sandbox, and its train and eval lines carry rewards."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SMALL = ["task=code", "model.warmup_steps=150", "trainer.max_steps=8", "trainer.eval_every=4", "task.val_size=16",
         "trainer.eval_samples=1", "batch.prompts=8", "batch.generations=4", "offpolicy=ppo",
         "offpolicy.batches_per_version=1", "engine.threads=1"]


def test_rlscale_run_trains_on_the_code_task(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", *SMALL, f"out={run_dir}",
                           f"cache_dir={tmp_path / 'cache'}"], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["prompt"].startswith("f(") and s["reference"].startswith("def f(") for s in samples)
    assert any(s["correct"] for s in samples)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 9))
    assert all(-1.0 <= r["reward"] <= 1.0 for r in train)
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 4, 8]
