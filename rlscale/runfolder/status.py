"""status.json: the run's state with a reason, written atomically; prune.json: a request to stop the run
early (written by the sweep's pruning, rlscale.sweep.prune; read by the trainer at each eval).

A training run keeps ``STATUS_RESERVE`` (64 KiB of zeros) beside status.json while it runs: when a write of
status.json finds the disk full, the reserve is freed and the write tried once more, so a run that failed for
want of space reads ``failed`` with that reason, never ``running``."""
from __future__ import annotations

import errno
import json
import time
from enum import Enum
from pathlib import Path
from typing import Any, Dict, Optional

from rlscale.runfolder.atomic import atomic_write_json


class RunState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    DIVERGED = "diverged"
    PREEMPTED = "preempted"
    PRUNED = "pruned"


PRUNE_REQUEST = "prune.json"
STATUS_JSON = "status.json"
STATUS_RESERVE = ".status-reserve"
RESERVE_BYTES = 64 * 1024


def write_status(run_dir: Path, state: RunState, reason: str = "", **extra: Any) -> None:
    """Write status.json atomically; on a full disk, free the run's reserve (module docstring) and try once
    more."""
    payload = {"state": RunState(state).value, "reason": reason, "time": time.time(), **extra}
    path = Path(run_dir) / STATUS_JSON
    try:
        atomic_write_json(path, payload)
    except OSError as err:
        reserve = Path(run_dir) / STATUS_RESERVE
        if err.errno != errno.ENOSPC or not reserve.exists():
            raise
        reserve.unlink()
        atomic_write_json(path, payload)


def reserve_status_space(run_dir: Path) -> None:
    """Keep ``RESERVE_BYTES`` on disk for the run's last status write (best effort: a disk already full keeps
    none)."""
    try:
        (Path(run_dir) / STATUS_RESERVE).write_bytes(b"\0" * RESERVE_BYTES)
    except OSError:
        (Path(run_dir) / STATUS_RESERVE).unlink(missing_ok=True)


def release_status_space(run_dir: Path) -> None:
    (Path(run_dir) / STATUS_RESERVE).unlink(missing_ok=True)


def read_status(run_dir: Path) -> Dict[str, Any]:
    """The run's status; a missing or unreadable file reads as pending / unknown, never raises."""
    path = Path(run_dir) / STATUS_JSON
    if not path.exists():
        return {"state": RunState.PENDING.value, "reason": "no status.json yet"}
    try:
        data = json.loads(path.read_text())
        RunState(data["state"])
        return data
    except (OSError, ValueError, KeyError, TypeError) as err:
        return {"state": "unknown", "reason": f"unreadable status.json: {err}"}


def prune_request(run_dir: Path) -> Optional[Dict[str, Any]]:
    """The run's prune request (its reason in ``reason``), or None when there is none."""
    path = Path(run_dir) / PRUNE_REQUEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}
