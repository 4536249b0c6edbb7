"""``rlscale sweep`` signalled, with real processes: Ctrl-C (SIGINT to the sweep's process group, as a terminal
sends it) or SIGTERM (to the sweep's process) stops a foreground sweep's local lane in one line, exit status
130 or 143 and no traceback, its run marked failed (interrupted) and never left ``running``; a rerun of the same
command resumes it to the results of an uninterrupted sweep. A detached sweep's lane goes on, and the line says
how to stop and resume it. A signal while the sweep submits is acted on once sweep.json records the job."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.sweep.dispatch import alive
from tests.faults.runs import TINY, assert_same_results, environment, rlscale, state_of
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
RUN = "loss-cispo"


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "sig.yaml"
    path.write_text(yaml.safe_dump({"name": "sig", "kind": "grid", "base": {"name": RUN}, "axes": {"loss": ["cispo"]},
                                    "seeds": 1, "overrides": [*TINY, "trainer.max_steps=40"]}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory) -> Path:
    """The run of the sweep, uninterrupted."""
    results = tmp_path_factory.mktemp("reference")
    done = rlscale("sweep", f"conf={spec}", "--results", results)
    assert done.returncode == 0, done.stdout + done.stderr
    return results / "sig" / RUN


def train_steps(run_dir: Path) -> list:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r["step"] for r in map(json.loads, filter(lambda line: line.endswith("}"), lines)) if r["kind"] == "train"]


def lane_of(results: Path) -> str:
    return json.loads((results / "sig" / "sweep.json").read_text())["jobs"][RUN]


def assert_stopped(results: Path, name: str) -> None:
    """The lane is gone, the run reads failed (interrupted) in status.json and in ``rlscale status``, and
    nothing trains any more."""
    run_dir = results / "sig" / RUN
    assert not alive("local", [lane_of(results)])
    status = state_of(run_dir)
    assert status["state"] == "failed" and status["reason"].startswith(f"interrupted ({name} to rlscale sweep)")
    shown = CliRunner().invoke(app, ["status", str(results)], env={"COLUMNS": "250"})
    assert "failed" in shown.output and "running" not in shown.output, shown.output
    reached = train_steps(run_dir)
    time.sleep(2)
    assert train_steps(run_dir) == reached


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("name, group", [("SIGINT", True), ("SIGTERM", False)], ids=["ctrl-c", "sigterm"])
def test_a_signalled_foreground_sweep_stops_its_lane_and_a_rerun_resumes_it(spec, reference, tmp_path, name, group):
    results = tmp_path / "results"
    command = [sys.executable, "-m", "rlscale.cli", "sweep", f"conf={spec}", "--results", str(results)]
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, env=environment())
    run_dir = results / "sig" / RUN
    wait_for(lambda: len(train_steps(run_dir)) >= 4 or sweep.poll() is not None, "the run's step 4", timeout=300)
    assert sweep.poll() is None, "the sweep ended before it was signalled"
    (os.killpg if group else os.kill)(sweep.pid, getattr(signal, name))
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 128 + getattr(signal, name), out + err
    line = one_line(err)
    assert line == (f"interrupted ({name}): stopped 1 lane(s) of {results / 'sig'}; unfinished runs marked failed "
                    f"(interrupted): {RUN}; rerun the same command to resume them from their last checkpoints")
    assert_stopped(results, name)
    assert max(train_steps(run_dir)) < 40
    rerun = rlscale(*command[3:])
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert state_of(run_dir)["state"] == "done"
    assert_same_results(run_dir, reference)


def signalled_after_submitting(spec: Path, results: Path, name: str, launcher: str, *args: str) -> None:
    """The sweep, signalled ``name`` once its one job is submitted, exits 128 + the number saying that the job
    goes on and how to follow, stop and resume it."""
    sent = rlscale("sweep", f"conf={spec}", "--results", results, *args,
                   fault={"at": "submit", "call": 1, "phase": "after", "signal": name})
    assert sent.returncode == 128 + getattr(signal, name), sent.stdout + sent.stderr
    sweep_dir = results / "sig"
    assert one_line(sent.stderr) == (f"interrupted ({name}): the 1 {launcher} job(s) of {sweep_dir} go on; follow "
                                     f"with rlscale status {sweep_dir}, stop with rlscale cancel {sweep_dir}, "
                                     "resume by rerunning the same command")


def test_a_detached_sweep_signalled_as_it_submits_says_its_lane_goes_on(spec, reference, tmp_path):
    results = tmp_path / "results"
    signalled_after_submitting(spec, results, "SIGTERM", "local", "--detach")
    run_dir = results / "sig" / RUN
    wait_for(lambda: not alive("local", [lane_of(results)]), "the detached lane to end", timeout=300)
    assert state_of(run_dir)["state"] == "done"
    assert_same_results(run_dir, reference)


def test_ctrl_c_as_a_sweep_submits_stops_the_recorded_lane(spec, tmp_path):
    results = tmp_path / "results"
    sent = rlscale("sweep", f"conf={spec}", "--results", results,
                   fault={"at": "submit", "call": 1, "phase": "after", "signal": "SIGINT"})
    assert sent.returncode == 130, sent.stdout + sent.stderr
    assert one_line(sent.stderr).startswith(f"interrupted (SIGINT): stopped 1 lane(s) of {results / 'sig'}")
    assert_stopped(results, "SIGINT")


def test_a_sweep_signalled_before_it_submits_says_nothing_runs(spec, tmp_path):
    """SIGTERM at the sweep's first write (the run configs, before any submission)."""
    sent = rlscale("sweep", f"conf={spec}", "--results", tmp_path / "results",
                   fault={"at": "write", "call": 1, "phase": "before", "signal": "SIGTERM"})
    assert sent.returncode == 143, sent.stdout + sent.stderr
    assert one_line(sent.stderr) == "interrupted (SIGTERM) before this command submitted any run; nothing it started runs"
    assert not (tmp_path / "results" / "sig" / ".submitit").exists()


@pytest.mark.slurm
def test_a_signalled_slurm_sweep_says_its_jobs_go_on(slurm_cluster, spec, tmp_path):
    results = tmp_path / "results"
    signalled_after_submitting(spec, results, "SIGINT", "slurm", "launcher=slurm")
    job = lane_of(results)
    cancelled = CliRunner().invoke(app, ["cancel", str(results)])
    assert cancelled.exit_code == 0 and f"slurm {job}" in cancelled.output, cancelled.output
