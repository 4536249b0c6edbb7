"""Sweeps on a real SLURM (single node on localhost, with accounting): a 3-variant sweep as a submitit job
array with the embedded default, one task requeued mid-run by ``scontrol requeue`` and one signalled as
before a time limit (submitit checkpoints and requeues it), both resuming and ending with gap-free
metrics; and a generated sbatch script submitted with plain sbatch, which produces the same run
directory the submitit path would (a later sweep sees it finished)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.runfolder import read_metrics
from rlscale.sweep.status import collect, refs_under
from rlscale.sweep.resolve import hydra_quote
from rlscale.sweep.orchestrator import SweepRequest, plan_sweep

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

STEPS = 12
SHORT = [f"trainer.max_steps={STEPS}", "trainer.eval_every=3", "trainer.checkpoint_every=3", "task.val_size=40"]
SLURM = ["launcher=slurm", "launcher.mem_gb=2", "launcher.timeout_min=30"]
EVIL = "$(touch {m}) `touch {m}` \"dq\" 'sq' ; touch {m}"
SETUP = 'export RLSCALE_PROBE="$HOME/venv" && echo "probe=$RLSCALE_PROBE"'


def write_spec(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "kind": "loo", "base": {"name": "scalerl"}, "overrides": SHORT,
        "variants": {"loss_dapo": ["loss=dapo"], "ppo_offpolicy": ["offpolicy=ppo"]}}))
    return path


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 3.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def last_train_step(run_dir: Path) -> int:
    records, _ = read_metrics(run_dir / "metrics.jsonl")
    return max((r["step"] for r in records if r["kind"] == "train"), default=0)


def test_slurm_array_sweep_with_a_requeued_task(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    evil = EVIL.format(m=marker)
    results = tmp_path / f"res {evil}"
    spec = write_spec(tmp_path, "trio")
    result = CliRunner().invoke(app, [
        "sweep", f"conf={spec}", *SLURM, f"+launcher.extra_sbatch.comment={hydra_quote(evil)}",
        f"launcher.setup=[{hydra_quote(SETUP)}]", "--results", str(results), "--detach"])
    assert result.exit_code == 0, result.output
    sweep_dir = results.resolve() / "trio"
    jobs = json.loads((sweep_dir / "sweep.json").read_text())["jobs"]
    assert sorted(jobs) == ["loss_dapo", "ppo_offpolicy", "scalerl"]
    assert len({job.split("_")[0] for job in jobs.values()}) == 1  # one job array

    # mid-run (past the first checkpoints), each task acted on as soon as it gets there: the tasks of one array
    # run at their own pace, so waiting for both would let the faster one finish before it is signalled.
    # The signal SLURM sends before a time limit, which submitit turns into checkpoint() + requeue, must reach a
    # task that is still training; scontrol requeues a task in any state.
    wait_for(lambda: last_train_step(sweep_dir / "loss_dapo") >= 4, 900, "loss_dapo to pass its first checkpoint",
             every_s=0.1)
    subprocess.run(["scancel", "--signal=USR2", jobs["loss_dapo"]], check=True, timeout=60)
    wait_for(lambda: last_train_step(sweep_dir / "scalerl") >= 4, 900, "scalerl to pass its first checkpoint",
             every_s=0.1)
    subprocess.run(["scontrol", "requeue", jobs["scalerl"]], check=True, timeout=60)
    refs = refs_under(sweep_dir)
    rows = wait_for(lambda: (rows := collect(refs)) and all(r.finished for r in rows) and rows, 1800,
                    "every run to finish", every_s=5)
    assert {r.ref.run: r.state for r in rows} == {"scalerl": "done", "loss_dapo": "done", "ppo_offpolicy": "done"}

    for run in ("scalerl", "loss_dapo"):
        history = subprocess.run(["sacct", "-n", "-X", "-D", "-j", jobs[run], "-o", "State"], capture_output=True,
                                 text=True, timeout=60, check=True).stdout.split()
        assert "REQUEUED" in history and history[-1] == "COMPLETED", (run, history)
    signalled = (sweep_dir / ".submitit" / jobs["loss_dapo"] / f"{jobs['loss_dapo']}_0_log.out").read_text()
    assert "Caught signal SIGUSR2" in signalled and "Calling checkpoint method" in signalled
    for run in ("scalerl", "loss_dapo", "ppo_offpolicy"):
        run_dir = sweep_dir / run
        raw = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        # the raw file: every step once, in order, nothing lost or repeated across the requeue
        assert [r["step"] for r in raw if r["kind"] == "train"] == list(range(1, STEPS + 1)), run
        assert [r["step"] for r in raw if r["kind"] == "eval"] == list(range(0, STEPS + 1, 3)), run
        records, warnings = read_metrics(run_dir / "metrics.jsonl")
        assert len(records) == len(raw) and not warnings
    logs = "".join(p.read_text() for p in (sweep_dir / ".submitit").glob("*/*_log.out"))
    assert f"probe={os.environ['HOME']}/venv" in logs and not marker.exists()  # setup runs as shell, nothing else


def test_plain_sbatch_script_makes_the_same_run_dir(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "plain")
    args = (f"conf={spec}", *SLURM, "trainer.max_steps=4", "trainer.checkpoint_every=2", "trainer.eval_every=2")
    result = CliRunner().invoke(app, ["sweep", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    script = tmp_path / "slurm/plain/ppo_offpolicy.sbatch"
    done = subprocess.run(["sbatch", "--wait", str(script)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = (tmp_path / "results/plain/ppo_offpolicy").resolve()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl")[0] if r["kind"] == "train"] == [1, 2, 3, 4]
    assert list(run_dir.glob("slurm-*.out"))
    plan = plan_sweep(SweepRequest(args=args))
    assert plan.skipped == {"ppo_offpolicy": "finished"}
    assert [r.run.name for r in plan.submit] == ["scalerl", "loss_dapo"]


def test_cancel_stops_a_slurm_sweep_and_marks_its_runs(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "slow.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "slow", "kind": "list", "base": {"name": "scalerl"},
        "overrides": ["trainer.max_steps=400", "trainer.eval_every=200", "trainer.checkpoint_every=2",
                      "task.val_size=40"], "variants": {"loss_dapo": ["loss=dapo"]}}))
    results = tmp_path / "results"
    started = CliRunner().invoke(app, ["sweep", f"conf={spec}", *SLURM, "--results", str(results), "--detach"])
    assert started.exit_code == 0, started.output
    sweep_dir = results.resolve() / "slow"
    jobs = json.loads((sweep_dir / "sweep.json").read_text())["jobs"]
    wait_for(lambda: last_train_step(sweep_dir / "scalerl") >= 2, 900, "scalerl to train", every_s=0.5)

    cancelled = CliRunner().invoke(app, ["cancel", str(results)])
    assert cancelled.exit_code == 0, cancelled.output
    assert "cancelled jobs (slurm" in cancelled.output and "2 unfinished run(s)" in cancelled.output
    queued = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(sorted(set(jobs.values())))], capture_output=True,
                            text=True, timeout=60).stdout
    assert queued.strip() == ""
    for run in ("scalerl", "loss_dapo"):
        status = json.loads((sweep_dir / run / "status.json").read_text())
        assert status["state"] == "failed" and status["reason"].startswith("cancelled"), (run, status)
