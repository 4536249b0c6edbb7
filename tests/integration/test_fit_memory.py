"""Fit and report memory stays bounded: a valid 200 MB metrics file (about 213,000 train lines and 21,000 evals)
fitted with --n-boot 100000 under 2 GB, its window fitted on group means (rlscale.fit.binning) and its
bootstrap drawn in chunks (rlscale.fit.bootstrap)."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LIMIT_KB = 2 * 1024 * 1024
TRAIN = {"clip_fraction": 0.0, "entropy": 1.79, "grad_norm": 1.5, "kind": "train", "loss": -0.52, "lr": 2e-6,
         "pass_rate": 0.05, "pool_active": 2000, "ratio_mean": 0.999, "response_tokens_mean": 33.4, "reward": -0.9,
         "signal_fraction": 0.19, "step_seconds": 27.7, "tokens_per_s": 154.2, "truncation_rate": 0.4,
         "trainer_wait_s": 12.3, "weight_sync_s": 0.014, "samples_per_s": 4.6, "kept_prompt_fraction": 0.19}


def write_metrics(path: Path, size: int) -> int:
    """A valid metrics file of ``size`` bytes: a train line per step and an eval every 10 steps on a rising
    sigmoid; returns the number of evals."""
    rng = random.Random(0)
    written, step, evals = 0, 0, 0
    with open(path, "w") as fh:
        while written < size:
            step += 1
            compute = {"step": step, "flops": step * 1e10, "gpu_hours": step * 1e-3, "samples": step * 128}
            lines = [json.dumps({**TRAIN, **compute}) + "\n"]
            if step % 10 == 0:
                reward = 0.02 + 0.43 / (1 + (3e4 / step) ** 3) + rng.gauss(0, 0.01)
                lines.append(json.dumps({**compute, "kind": "eval", "val_reward": reward, "val_reward_se": 0.0157,
                                         "val_samples": 1000, "val_prompts": 1000}) + "\n")
                evals += 1
            for line in lines:
                fh.write(line)
                written += len(line)
    return evals


def test_fit_of_a_200_mb_metrics_file_with_100000_resamples_stays_under_2_gb(tmp_path):
    run = tmp_path / "results" / "sweep" / "base_s0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    evals = write_metrics(run / "metrics.jsonl", 200_000_000)
    # measured in a process of its own, whose only child is the fit (RUSAGE_CHILDREN of pytest holds every test)
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "rlscale.cli", "fit",
                           str(tmp_path / "results"), "--n-boot", "100000", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    peak = int(done.stdout.strip().splitlines()[-1])
    assert peak < LIMIT_KB, f"peak {peak / 1024:.0f} MiB"
    fit = json.loads((tmp_path / "out" / "fits.json").read_text())["runs"][0]
    assert fit["status"] == "ok" and fit["n_points"] == 500 and len(fit["points_y"]) == evals
    assert "evals in the window, fitted as the means of 500 groups" in fit["message"]
    assert fit["A_lo"] < 0.45 < fit["A_hi"] and fit["B_lo"] < 3 < fit["B_hi"]
