"""End-to-end runs of the trainer on the embedded default (tiny Llama + reasoning-gym chain_sum).

These build the cached warm-up model once (in the default cache, ~1-2 min on 2 cores) and then run
short trainings through the real CLI.
"""
from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlscale.fit.api import fit_results
from rlscale.fit.results import FitSettings
from rlscale.runfolder.metrics import MEASURED_FIELDS, read_metrics

pytestmark = pytest.mark.slow

SHORT = ["offpolicy=ppo", "offpolicy.batches_per_version=2", "batch.prompts=8", "batch.generations=4", "task.val_size=40",
         "trainer.eval_samples=2", "trainer.eval_every=2", "trainer.checkpoint_every=3", "trainer.max_steps=8",
         "engine.threads=1"]
TIMING_KEYS = MEASURED_FIELDS  # measured; all else must match


def rlscale(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rlscale.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def run_to_end(*args: str) -> str:
    proc = rlscale("run", *args)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in TIMING_KEYS}


def test_default_run_learns_a_sigmoid(tmp_path):
    """The true default (the ScaleRL recipe, PipelineRL with scheduled in-flight updates, 60 updates): the
    validation pass rate rises by >= 0.3 over R0 and Eq. 1 fits the curve on the analytic FLOPs axis
    (R^2 >= 0.85; below it the curve has lost its shape). A CPU run names its measured axis core_hours, never
    gpu_hours, and every eval carries the standard error of its reward."""
    run_to_end("out=" + str(tmp_path / "run"))
    records = lines(tmp_path / "run" / "metrics.jsonl")
    assert all("core_hours" in r and "gpu_hours" not in r for r in records)
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == list(range(0, 61, 6))
    assert all(0 < r["val_reward_se"] < 0.05 for r in evals)
    curve = [r["val_reward"] for r in evals]
    assert 0.05 <= curve[0] <= 0.35, curve
    assert max(curve[-2:]) >= curve[0] + 0.3, curve
    fit = fit_results(tmp_path / "run", FitSettings(x="flops", n_boot=0)).runs[0]
    assert fit.status == "ok" and fit.r2 >= 0.85, (fit.status, fit.r2, curve)
    assert json.loads((tmp_path / "run" / "status.json").read_text())["state"] == "done"


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path):
    ref_dir, cut_dir = tmp_path / "ref", tmp_path / "cut"
    run_to_end("out=" + str(ref_dir), *SHORT)

    proc = rlscale("run", "out=" + str(cut_dir), *SHORT, start_new_session=True)
    metrics = cut_dir / "metrics.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline:  # kill once step 5 is logged: past the step-3 checkpoint, before step 6's
        if metrics.exists() and any(r["step"] >= 5 and r["kind"] == "train" for r, _ in [
                (json.loads(x), 0) for x in metrics.read_text().splitlines() if x.endswith("}")]):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads((cut_dir / "status.json").read_text())["state"] == "running"  # killed, not finished

    run_to_end("out=" + str(cut_dir), *SHORT)  # same command resumes from checkpoints/last.pt
    ref, cut = lines(ref_dir / "metrics.jsonl"), lines(cut_dir / "metrics.jsonl")
    keys = [(r["kind"], r["step"]) for r in cut]
    assert len(keys) == len(set(keys)), "duplicated step in metrics.jsonl"
    assert [r["step"] for r in cut if r["kind"] == "train"] == list(range(1, 9))
    assert [r["step"] for r in cut if r["kind"] == "eval"] == [0, 2, 4, 6, 8]
    assert [without_timing(r) for r in cut] == [without_timing(r) for r in ref]
    started = [r["step"] for r in cut if "startup_s" in r]
    assert started[0] == 1 and len(started) == 2  # the start and the resume
    assert all(r["startup_s"] > 0 for r in cut if "startup_s" in r)
    assert all(r["compile_s"] == 0.0 for r in cut if r["kind"] == "train")  # CPU runs never compile
    records, warnings = read_metrics(cut_dir / "metrics.jsonl")
    assert not warnings and len(records) == len(cut)
    assert lines(cut_dir / "samples.jsonl") == lines(ref_dir / "samples.jsonl")  # cut back like metrics.jsonl


def test_a_finished_run_extended_repeats_the_longer_uninterrupted_run(tmp_path):
    """``rlscale run --run-dir DIR trainer.max_steps=N`` continues a finished run from its last checkpoint:
    nothing it wrote is rewritten, and its curve is the one a run planned for N steps from the start draws."""
    ref_dir, short_dir = tmp_path / "ref", tmp_path / "short"
    run_to_end("out=" + str(ref_dir), *SHORT)
    run_to_end("out=" + str(short_dir), *SHORT, "trainer.max_steps=4")
    before = (short_dir / "metrics.jsonl").read_text()
    out = run_to_end("--run-dir", str(short_dir), "trainer.max_steps=8")
    assert out.strip().splitlines()[-1].endswith(": done"), out[-2000:]
    assert (short_dir / "metrics.jsonl").read_text().startswith(before)
    ref, extended = lines(ref_dir / "metrics.jsonl"), lines(short_dir / "metrics.jsonl")
    assert [(r["kind"], r["step"]) for r in extended] == [(r["kind"], r["step"]) for r in ref]
    assert [without_timing(r) for r in extended] == [without_timing(r) for r in ref]
    assert json.loads((short_dir / "status.json").read_text())["step"] == 8


def test_a_short_run_writes_samples_that_the_report_shows_escaped(tmp_path):
    """Every eval logs ``trainer.eval_samples_logged`` completions; the tiny model's traces hold
    ``</think>``, which the report shows as text."""
    run_dir = tmp_path / "sweep" / "run"
    run_to_end("out=" + str(run_dir), *SHORT, "trainer.max_steps=2", "trainer.eval_samples_logged=3")
    samples = lines(run_dir / "samples.jsonl")
    assert [s["step"] for s in samples] == [0, 0, 0, 2, 2, 2]
    assert [s["problem"] for s in samples] == [0, 1, 2] * 2 and {s["policy_version"] for s in samples} == {0, 2}
    for s in samples:
        assert s["thinks"] and s["prompt"].endswith(" =") and s["reward"] == (1.0 if s["correct"] else -1.0)
        if not s["truncated"]:
            assert "</think>" in s["completion"] and s["answer"] == s["completion"].rpartition("</think>")[2].strip()
    report = subprocess.run([sys.executable, "-m", "rlscale.cli", "report", "--html", str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert report.returncode == 0, report.stdout[-2000:] + report.stderr[-2000:]
    page = (tmp_path / "report.html").read_text()
    assert "6 sample completions of the first and last eval (2 evals in samples.jsonl)" in page
    assert "<think>" not in page and "</think>" not in page
    shown = [s for s in samples if "</think>" in s["completion"]]
    assert shown and all(html.escape(s["completion"], quote=False) in page for s in shown)


def test_invalid_config_fails_before_compute(tmp_path):
    proc = rlscale("run", "out=" + str(tmp_path / "bad"), "batch.generations=1", "normalization=group")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "field 'batch.generations': must be >= 2, got 1" in out
    assert not (tmp_path / "bad" / "metrics.jsonl").exists()
