"""Several tasks in one run of the embedded tiny model.

- ``rlscale run task=math_code`` trains on sums and code together (``task.name=mixture``): train lines carry each
  part's reward, every eval line carries each part's held-out figures beside the pooled ones, the code part's
  held-out reward rises (the warm-up's noise shifts a function's last constant, which RL fixes from the
  sandbox's verdicts alone), ``rlscale fit --y val_reward/math,val_reward/code`` fits each part's curve and the
  report shows them in parallel;
- ``rlscale run eval=code`` trains on the sums and evaluates the code task's held-out functions beside them at
  every eval (a downstream set, ``val_reward/code``)."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

STEPS = 20
EVALS = [0, 5, 10, 15, 20]
MIXED = ["task=math_code", f"trainer.max_steps={STEPS}", "trainer.eval_every=5", "mixture.parts.0.task.val_size=100",
         "mixture.parts.1.task.val_size=100"]


def test_a_math_and_code_run_logs_both_parts_and_its_code_reward_rises(tmp_path):
    run_dir = tmp_path / "results" / "mix" / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", *MIXED, f"out={run_dir}"], capture_output=True,
                          text=True, timeout=1200, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1))
    for r in train:
        assert r["samples/math"] + r["samples/code"] == 64  # 8 prompts x 8 generations, every one in a part
        pooled = (r["reward/math"] * r["samples/math"] + r["reward/code"] * r["samples/code"]) / 64
        assert r["reward"] == pytest.approx(pooled)
    evals = {r["step"]: r for r in records if r["kind"] == "eval"}
    assert sorted(evals) == EVALS
    for r in evals.values():
        assert r["val_prompts/math"] == 100 and r["val_prompts/code"] == 100 and r["val_prompts"] == 200
        assert r["val_reward"] == pytest.approx((r["val_reward/math"] + r["val_reward/code"]) / 2)
    first, last = evals[0], evals[STEPS]
    rise = last["val_reward/code"] - first["val_reward/code"]
    noise = math.hypot(first["val_reward_se/code"], last["val_reward_se/code"])
    assert rise > 2 * noise, (first["val_reward/code"], last["val_reward/code"], noise)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(not s["prompt"].startswith("f(") for s in samples)  # the first logged prompts: sums
    fit = subprocess.run([sys.executable, "-m", "rlscale.cli", "fit", str(tmp_path / "results"), "--y",
                          "val_reward/math,val_reward/code"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert fit.returncode == 0, (fit.stdout + fit.stderr)[-3000:]
    printed = " ".join(fit.stdout.split())
    assert "y = val_reward/code" in printed and "y = val_reward/math" in printed
    report = subprocess.run([sys.executable, "-m", "rlscale.cli", "report", "--html", str(tmp_path / "results")],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    assert "val_reward/math, val_reward/code in parallel" in (tmp_path / "results" / "report.html").read_text()


def test_a_downstream_set_is_scored_at_every_eval(tmp_path):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", "eval=code",
                           "eval.downstream.0.task.val_size=30", "trainer.max_steps=4", "trainer.eval_every=2",
                           f"out={run_dir}"], capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 2, 4]
    for r in evals:
        assert r["val_prompts/code"] == 30 and r["val_samples/code"] == 30 and 0 <= r["val_reward/code"] <= 1
        assert r["val_prompts"] == 400  # the run's own held-out sums, unchanged
    assert not any("/" in key for r in records if r["kind"] == "train" for key in r)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert not any(s["prompt"].startswith("f(") for s in samples)  # no completion of the set is logged
