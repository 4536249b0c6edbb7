"""``rlscale run`` from the shell on the embedded default (a few steps on CPU): each distinct run gets its own
folder named after its overrides, with the records of how it was made (overrides.yaml, versions.yaml) and its
own train.log, a rerun of the same command finds the same folder, and ``-m`` over Hydra's ``range`` trains one
run per value."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

FAST = ["trainer.max_steps=2", "trainer.eval_every=2", "task.val_size=20"]


def rlscale(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def state(run_dir: Path) -> dict:
    return json.loads((run_dir / "status.json").read_text())


def test_two_plain_runs_get_two_folders_with_their_records(tmp_path):
    rlscale(tmp_path, "run", "batch.prompts=4", *FAST)
    rlscale(tmp_path, "run", *FAST, "batch.prompts=8")
    folders = sorted(p.name for p in (tmp_path / "results/default").iterdir())
    assert folders == ["batch.prompts-4_task.val_size-20_trainer.eval_every-2_trainer.max_steps-2",
                       "batch.prompts-8_task.val_size-20_trainer.eval_every-2_trainer.max_steps-2"]
    for folder, prompts in zip(folders, (4, 8)):
        run_dir = tmp_path / "results/default" / folder
        assert state(run_dir)["state"] == "done"
        assert f"batch.prompts={prompts}" in yaml.safe_load((run_dir / "overrides.yaml").read_text())
        versions = yaml.safe_load((run_dir / "versions.yaml").read_text())
        assert versions["command"].startswith("rlscale run ") and f"batch.prompts={prompts}" in versions["command"]
        assert versions["rlscale"] and versions["torch"] != "not installed"
        assert all(versions[name] for name in ("transformers", "vllm", "deepspeed"))  # a version or not installed
        log = (run_dir / "train.log").read_text().splitlines()
        assert all(f"[default/{folder}]" in line for line in log) and "train: step 2/2" in log[-2]
        assert log[-1].endswith("done at step 2")
    again = rlscale(tmp_path, "run", *FAST, "batch.prompts=4")  # another order of the same overrides
    assert f"results/default/{folders[0]}: finished (done at step 2 of 2); nothing to do" in again.stdout


def test_multirun_over_a_range_trains_one_run_per_value(tmp_path):
    rlscale(tmp_path, "run", "-m", "batch.prompts=range(4,12,4)", *FAST)
    sweep_dir = tmp_path / "results/multirun"
    runs = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert runs == ["prompts-4", "prompts-8"]
    for run, prompts in zip(runs, (4, 8)):
        assert state(sweep_dir / run)["state"] == "done"
        assert yaml.safe_load((sweep_dir / run / "config.yaml").read_text())["batch"]["prompts"] == prompts
        assert f"[multirun/{run}]" in (sweep_dir / run / "train.log").read_text()
    assert [p.name for p in (sweep_dir / ".submitit").iterdir() if p.is_dir()] == []  # no literal %j folder
