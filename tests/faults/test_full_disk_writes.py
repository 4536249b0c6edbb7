"""A full disk at each write of a run, in turn: every line appended to metrics.jsonl and samples.jsonl and
every atomic write (status.json, checkpoints/last.pt) meets ENOSPC at its fsync, as a file system that filled
up answers, once, on the write numbered K. Whatever K, the run ends ``failed`` with the cause in status.json
(never ``running``) and metrics.jsonl ends at a line end; but at the first write (status.json's ``running``: the
run does not start, the error names the file, nothing is written) and at the last (status.json's ``done``,
which the reserve beside status.json takes). The rerun of the same folder then trains on to results identical
to an uninterrupted run's (metrics lines but their timings, samples byte for byte).

The disk is simulated in the writing modules' ``os`` (their fsync), in process: a real one fills at no
chosen write. One run with a count of its writes is the uninterrupted reference.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from rlscale.config import typed
from rlscale.runfolder import atomic, metrics
from rlscale.train.entry import prepare_run_dir, train_run_dir
from tests.faults.runs import TINY, assert_same_results, ends_at_line_end, state_of

STEPS = 4


class FullAt:
    """The writing modules' ``os``: counts the fsyncs that end each write and answers ENOSPC to the ``full``-th
    (0: none)."""

    def __init__(self, full: int = 0):
        self.full, self.writes = full, 0

    def __getattr__(self, name):
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        self.writes += 1
        if self.writes == self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)


def prepared(root: Path) -> tuple:
    return prepare_run_dir([f"out={root / 'run'}", f"cache_dir={root.parent / 'cache'}", *TINY,
                            f"trainer.max_steps={STEPS}"])


def train(run_dir: Path, cfg, monkeypatch, disk: FullAt) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(metrics, "os", disk)
        patched.setattr(atomic, "os", disk)
        train_run_dir(run_dir, cfg=typed(cfg))


def test_a_full_disk_at_any_write_fails_the_run_and_a_rerun_finishes_it(tmp_path, monkeypatch):
    reference, cfg = prepared(tmp_path / "reference")
    train(reference, cfg, monkeypatch, FullAt())  # fills the data cache too
    counted = FullAt()
    train(*prepared(tmp_path / "counted"), monkeypatch, counted)
    assert state_of(reference)["state"] == "done" and counted.writes > 4 * STEPS
    outcomes = []
    for full in range(1, counted.writes + 1):
        run_dir, cfg = prepared(tmp_path / str(full))
        try:
            train(run_dir, cfg, monkeypatch, FullAt(full))
        except OSError as err:  # the first write, status.json's "running": the run did not start
            assert err.errno == errno.ENOSPC and err.filename == str(run_dir / "status.json"), full
            assert not (run_dir / "status.json").exists() and not (run_dir / "metrics.jsonl").exists()
            outcomes.append("not started")
        else:
            status = state_of(run_dir)
            if status["state"] == "done":  # the last status write: the reserve beside status.json took it
                assert status["step"] == STEPS and not (run_dir / ".status-reserve").exists(), (full, status)
            else:
                assert status["state"] == "failed" and "no space left on device" in status["reason"], (full, status)
                assert ends_at_line_end(run_dir / "metrics.jsonl"), full
            outcomes.append(status["state"])
        assert train_run_dir(run_dir) == "done", full
        assert_same_results(run_dir, reference)
    # the first write is status.json's "running"; the last, its "done", has the reserve to fall back on
    assert outcomes == ["not started"] + ["failed"] * (counted.writes - 2) + ["done"], outcomes
