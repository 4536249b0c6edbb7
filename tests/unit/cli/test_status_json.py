"""``rlscale status --json``: one JSON document on stdout with the table's facts per run (folder, state and reason,
step of max_steps, latest validation reward, the last train and eval numbers) and the summary; strict JSON (a NaN
loss is left out), and a folder without runs is a document with no runs."""
from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.runfolder.process import host
from rlscale.runfolder.status import RunState, write_status
from rlscale.sweep.status_json import RUN_FIELDS


def status(*args) -> dict:
    result = CliRunner().invoke(app, ["status", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def write_run(run_dir, state, lines, reason="", **extra):
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("trainer:\n  max_steps: 10\n")
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_status(run_dir, state, reason, **extra)


def test_status_json_holds_each_runs_state_step_and_last_metrics(tmp_path):
    root = tmp_path / "results"
    write_run(root / "sw" / "good", RunState.DONE, [
        {"step": 0, "kind": "eval", "val_reward": 0.25, "flops": 0.0},
        {"step": 10, "kind": "train", "reward": 0.5, "loss": float("nan"), "note": "text", "ok": True, "flops": 2e9},
        {"step": 10, "kind": "eval", "val_reward": 0.625, "val_reward_se": 0.125, "flops": 2e9}])
    write_run(root / "sw" / "bad", RunState.DIVERGED, [{"step": 3, "kind": "train", "reward": -1.0}],
              reason="non-finite loss at step 4")
    doc = status(root)
    assert doc["root"] == str(root)
    assert doc["summary"] == "2 runs: 1 done, 1 diverged" and doc["states"] == {"diverged": 1, "done": 1}
    assert doc["eta_s"] is None
    runs = {run["run"]: run for run in doc["runs"]}
    assert all(tuple(run) == RUN_FIELDS for run in doc["runs"])
    assert runs["good"] == {
        "sweep": "sw", "run": "good", "run_dir": str(root / "sw" / "good"), "state": "done", "reason": "",
        "step": 10, "max_steps": 10, "val_reward": 0.625, "eta_s": None, "job": None, "job_alive": False,
        "finished": True,
        "last_metrics": {"train": {"step": 10, "reward": 0.5, "flops": 2e9},  # the NaN loss, text and flags left out
                         "eval": {"step": 10, "val_reward": 0.625, "val_reward_se": 0.125, "flops": 2e9}}}
    assert (runs["bad"]["state"], runs["bad"]["reason"], runs["bad"]["step"], runs["bad"]["val_reward"]) == (
        "diverged", "non-finite loss at step 4", 3, None)
    assert runs["bad"]["last_metrics"] == {"train": {"step": 3, "reward": -1.0}}


def test_a_running_run_has_its_eta_and_a_folder_without_runs_an_empty_list(tmp_path):
    run = tmp_path / "solo"
    write_run(run, RunState.RUNNING, [{"step": 4, "kind": "train", "reward": 0.1, "step_seconds": 2.0}],
              pid=os.getpid(), host=host())
    [row] = status(run)["runs"]
    assert (row["state"], row["step"], row["max_steps"], row["eta_s"], row["finished"]) == ("running", 4, 10, 12.0,
                                                                                           False)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert status(empty) == {"root": str(empty), "summary": f"no runs under {empty}", "states": {}, "eta_s": None,
                             "runs": []}
