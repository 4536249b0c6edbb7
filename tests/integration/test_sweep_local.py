"""A real sweep on the local submitit executor with the real trainer (embedded default, few steps): runs
in parallel lanes, a crashing variant never stops the others, reruns skip finished runs and resubmit the
failed one, more steps extend the finished runs, a changed config is refused, ``--force`` clears,
``rlscale status`` reports, ``rlscale cancel`` stops a detached sweep that a rerun resumes, the setup line runs
as shell, and a results path with shell syntax never executes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.runfolder import read_metrics
from rlscale.sweep.resolve import hydra_quote

pytestmark = pytest.mark.slow

SHORT = ["trainer.max_steps=4", "trainer.eval_every=2", "trainer.checkpoint_every=2", "task.val_size=40"]
EVIL = "$(touch {m}) `touch {m}` \"dq\" 'sq' ; touch {m}"
SETUP = 'export RLSCALE_PROBE="$HOME/venv" && echo "probe=$RLSCALE_PROBE"'


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def raw_steps(run_dir: Path, kind: str):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["step"] for r in map(json.loads, lines) if r["kind"] == kind]


def test_local_sweep_runs_reruns_and_survives_a_crash(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps at the terminal width
    marker = tmp_path / "pwned"
    evil = EVIL.format(m=marker)
    spec = tmp_path / "mini.yaml"
    empty = tmp_path / "no_checkpoint_here"  # passes every check at compose, fails as its run loads the model
    empty.mkdir()
    spec.write_text(yaml.safe_dump({
        "name": "mini", "kind": "loo", "base": {"name": "scalerl"}, "overrides": SHORT,
        "variants": {"loss_dapo": ["loss=dapo"], "broken": ["model=hf", f"model.path={empty}"]}}, sort_keys=False))
    results = tmp_path / f"res {evil}"
    args = ["sweep", f"conf={spec}", f"launcher.setup=[{hydra_quote(SETUP)}]", "--results", str(results)]

    first = cli(*args)
    assert first.exit_code == 1, first.output  # the broken variant failed, the others finished
    sweep_dir = results.resolve() / "mini"
    record = json.loads((sweep_dir / "sweep.json").read_text())
    assert [v["run"] for v in record["variants"]] == ["scalerl", "loss_dapo", "broken"]
    assert len(set(record["jobs"].values())) == 2  # two lanes on two cores
    for run in ("scalerl", "loss_dapo"):
        run_dir = sweep_dir / run
        assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
        assert raw_steps(run_dir, "train") == [1, 2, 3, 4] and raw_steps(run_dir, "eval") == [0, 2, 4]
    broken = json.loads((sweep_dir / "broken/status.json").read_text())
    assert broken["state"] == "failed" and "no_checkpoint_here" in broken["reason"]
    # each run's log lines in its train.log and in its lane's submitit log carry its name; no literal %j folder
    assert sorted(p.name for p in (sweep_dir / ".submitit").iterdir() if p.is_dir()) == []
    lane_logs = "".join(p.read_text() for p in (sweep_dir / ".submitit").glob("*_log.*"))
    for run in ("scalerl", "loss_dapo"):
        lines = (sweep_dir / run / "train.log").read_text().splitlines()
        assert len(lines) >= 3 and all(f"[mini/{run}]" in line for line in lines), lines
        assert f"[mini/{run}] rlscale.progress INFO train: step 4/4" in lane_logs
        assert yaml.safe_load((sweep_dir / run / "versions.yaml").read_text())["rlscale"]
    # the local executor runs the setup line in its controller's shell, as written; the results path never runs
    assert f"probe={os.environ['HOME']}/venv" in capfd.readouterr().out and not marker.exists()

    status = cli("status", str(results))
    assert status.exit_code == 0 and "broken" in status.output and "failed" in status.output
    assert "4/4" in status.output

    second = cli(*args)
    assert second.exit_code == 1
    summary = " ".join(second.output.split())
    assert "submitted 1 run(s) via local; skipped scalerl (finished), loss_dapo (finished)" in summary
    again = json.loads((sweep_dir / "sweep.json").read_text())
    assert again["jobs"]["scalerl"] == record["jobs"]["scalerl"] and again["jobs"]["broken"] != record["jobs"]["broken"]
    assert again["created"] == record["created"]

    # more steps in the spec extend the finished runs from their last checkpoint; nothing written is rewritten
    before = (sweep_dir / "scalerl" / "metrics.jsonl").read_text()
    longer = cli(*args[:-2], "trainer.max_steps=6", "--results", str(results))
    assert longer.exit_code == 1, longer.output  # broken fails again
    assert (sweep_dir / "scalerl" / "metrics.jsonl").read_text().startswith(before)
    for run in ("scalerl", "loss_dapo"):
        assert raw_steps(sweep_dir / run, "train") == [1, 2, 3, 4, 5, 6]
        assert raw_steps(sweep_dir / run, "eval") == [0, 2, 4, 6]
    shorter = cli(*args)  # the spec's 4 steps again: the extended runs stay as they are
    assert "scalerl (finished (extended to 6 steps))" in " ".join(shorter.output.split()), shorter.output

    changed = cli(*args[:-2], "trainer.eval_every=1", "--results", str(results))
    assert changed.exit_code == 2 and "field 'trainer' differs" in changed.output and "--force" in changed.output

    forced = cli(*args, "--force", "--dry-run")
    assert forced.exit_code == 0, forced.output
    for run in ("scalerl", "loss_dapo", "broken"):
        assert not (sweep_dir / run / "metrics.jsonl").exists() and not (sweep_dir / run / "checkpoints").exists()
        assert json.loads((sweep_dir / run / "status.json").read_text())["state"] == "pending"
    assert read_metrics(sweep_dir / "scalerl" / "metrics.jsonl")[0] == []
    assert not marker.exists()


def test_a_detached_sweep_returns_through_a_pipe_while_its_runs_train(tmp_path):
    spec = tmp_path / "solo.yaml"
    spec.write_text(yaml.safe_dump({"name": "solo", "kind": "grid", "base": {"name": "loss-cispo"},
                                    "axes": {"loss": ["cispo"]}, "seeds": 1,
                                    "overrides": ["trainer.max_steps=40", "trainer.eval_every=20",
                                                  "task.val_size=40"]}, sort_keys=False))
    results = tmp_path / "results"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "sweep", f"conf={spec}", "--results", str(results),
                           "--detach"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
                          cwd=tmp_path)
    returned = time.monotonic() - start
    assert done.returncode == 0 and "detached" in done.stdout, done.stdout + done.stderr
    run_dir = next((results / "solo").glob("*/config.yaml")).parent
    state = json.loads((run_dir / "status.json").read_text())["state"]
    assert state in ("pending", "queued", "running"), (state, returned)  # returned while the run trains
    deadline = time.monotonic() + 600
    while json.loads((run_dir / "status.json").read_text())["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline, "the detached run did not finish"
        time.sleep(2)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"


def test_cancel_stops_a_detached_sweep_and_a_rerun_resumes_it(tmp_path):
    spec = tmp_path / "long.yaml"
    spec.write_text(yaml.safe_dump({"name": "long", "kind": "grid", "base": {"name": "loss-cispo"},
                                    "axes": {"loss": ["cispo"]}, "seeds": 1,
                                    "overrides": ["trainer.max_steps=400", "trainer.eval_every=200",
                                                  "trainer.checkpoint_every=2", "task.val_size=40"]},
                                   sort_keys=False))
    results = tmp_path / "results"
    sweep = [sys.executable, "-m", "rlscale.cli", "sweep", f"conf={spec}", "--results", str(results), "--detach"]
    started = subprocess.run(sweep, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    run_dir = results / "long" / "loss-cispo"
    deadline = time.monotonic() + 600
    while not (run_dir / "metrics.jsonl").exists() or 4 not in raw_steps(run_dir, "train"):
        assert time.monotonic() < deadline, "the run did not reach step 4"
        time.sleep(1)
    job = json.loads((results / "long" / "sweep.json").read_text())["jobs"]["loss-cispo"]

    cancelled = cli("cancel", str(results))
    assert cancelled.exit_code == 0, cancelled.output
    assert f"cancelled jobs (local {job})" in cancelled.output and "1 unfinished run(s)" in cancelled.output
    assert not Path(f"/proc/{job}").exists() or b"submitit" not in Path(f"/proc/{job}/cmdline").read_bytes()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and status["reason"].startswith("cancelled")
    reached = max(raw_steps(run_dir, "train"))
    time.sleep(3)
    assert max(raw_steps(run_dir, "train")) == reached  # nothing trains any more
    assert "nothing to cancel" in cli("cancel", str(results)).output

    resumed = subprocess.run(sweep, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert resumed.returncode == 0 and "submitted 1 run(s)" in " ".join(resumed.stdout.split()), resumed.stdout
    assert "cancelled jobs" in cli("cancel", str(results)).output
