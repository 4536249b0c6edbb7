"""status.json: the run's state with a reason, written atomically; prune.json: a request to stop the run
early (written by the sweep's pruning, rlscale.sweep.prune; read by the trainer at each eval)."""
from __future__ import annotations

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


def write_status(run_dir: Path, state: RunState, reason: str = "", **extra: Any) -> None:
    payload = {"state": RunState(state).value, "reason": reason, "time": time.time(), **extra}
    atomic_write_json(Path(run_dir) / STATUS_JSON, payload)


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
