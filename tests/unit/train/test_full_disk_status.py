"""A run the disk fills up under: the metrics append fails, and status.json still says ``failed`` with the
cause, never ``running``: the space the run reserved beside status.json (rlscale.runfolder.status) is freed
for that last write.

The disk is simulated (a real one would have to fill at one chosen write): from the step-2 metrics line on,
every metrics append and every status write answers ENOSPC, as a full file system does, until a file is
deleted; deleting the reserve gives the space back.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from rlscale.config import typed
from rlscale.runfolder import metrics, status
from rlscale.train.entry import prepare_run_dir, train_run_dir

TINY = ["model.warmup_steps=2", "trainer.max_steps=4", "trainer.eval_every=2", "trainer.checkpoint_every=2",
        "task.val_size=4", "task.train_size=8", "trainer.eval_samples=1", "batch.prompts=2",
        "batch.generations=2", "offpolicy=ppo", "offpolicy.batches_per_version=1", "engine.threads=1"]


def test_a_run_failed_by_a_full_disk_reads_failed(tmp_path, monkeypatch):
    run_dir, cfg = prepare_run_dir([f"out={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}", *TINY])
    disk = {"full": False}
    enospc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    append, write_json, unlink = metrics.MetricsLog.append, status.atomic_write_json, Path.unlink

    def append_on(self, record):
        if record.get("step") == 2 or disk["full"]:
            disk["full"] = True
            with monkeypatch.context() as m:  # the append's own open() meets the full disk
                m.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(enospc))
                return append(self, record)
        return append(self, record)

    def write_json_on(path, obj):
        if disk["full"]:
            raise enospc
        write_json(path, obj)

    def unlink_on(self, missing_ok=False):
        unlink(self, missing_ok=missing_ok)
        disk["full"] = False

    monkeypatch.setattr(metrics.MetricsLog, "append", append_on)
    monkeypatch.setattr(status, "atomic_write_json", write_json_on)
    monkeypatch.setattr(Path, "unlink", unlink_on)
    assert train_run_dir(run_dir, cfg=typed(cfg)) == "failed"
    written = json.loads((run_dir / "status.json").read_text())
    assert written["state"] == "failed" and "no space left on device" in written["reason"]
    assert "metrics.jsonl: cannot append the step-2 line" in written["reason"]
    assert not (run_dir / status.STATUS_RESERVE).exists()
