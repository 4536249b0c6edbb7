"""``RunJob``, the body of every sweep job: each run of a lane starts from the lane's whole thread budget,
since a PipelineRL run takes its share of whatever it finds (rlscale.train.offpolicy.pipeline.split_cpu_threads)."""
from __future__ import annotations

from pathlib import Path

import torch

import rlscale.train.entry
from rlscale.runfolder import RunState, write_status
from rlscale.sweep.job import RunJob


def test_every_run_of_a_lane_gets_the_lane_budget(tmp_path, monkeypatch):
    seen = []

    def fake_train(run_dir: Path) -> str:  # stands in for a PipelineRL run: records, then splits
        seen.append(torch.get_num_threads())
        torch.set_num_threads(max(1, torch.get_num_threads() // 2))
        write_status(run_dir, RunState.DONE)
        return RunState.DONE.value

    monkeypatch.setattr(rlscale.train.entry, "train_run_dir", fake_train)
    runs = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        write_status(tmp_path / name, RunState.PENDING)
        runs.append(tmp_path / name)
    before = torch.get_num_threads()
    try:
        assert RunJob(run_dirs=tuple(runs), threads=4)() == {"a": "done", "b": "done", "c": "done"}
    finally:
        torch.set_num_threads(before)
    assert seen == [4, 4, 4]  # before the fix: 4, 2, 1
