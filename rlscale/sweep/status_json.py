"""``rlscale status --json``: the facts of the progress table as one JSON document, for scripts and dashboards.

Each run is an object (``RUN_FIELDS``): its sweep, name and folder, state and reason, step of max_steps, latest
validation reward (the R_C of Eq. 1), ETA in seconds, launcher job and whether it is alive, whether it is finished,
and the finite numbers of its last train and eval lines (``last_metrics``). The document adds the root it was
asked about, the summary line, the count of runs per state and the overall ETA. A value that is not known is
``null``; the document holds no NaN or infinity, so any JSON reader takes it."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Sequence

from rlscale.sweep.status import RunProgress
from rlscale.sweep.table import overall_eta, summary

RUN_FIELDS = ("sweep", "run", "run_dir", "state", "reason", "step", "max_steps", "val_reward", "eta_s", "job",
              "job_alive", "finished", "last_metrics")


def run_json(row: RunProgress) -> Dict[str, Any]:
    """One run's object, its keys in ``RUN_FIELDS`` order."""
    return {"sweep": row.ref.sweep, "run": row.ref.run, "run_dir": str(row.ref.run_dir), "state": row.state,
            "reason": row.reason, "step": row.step, "max_steps": row.max_steps, "val_reward": row.val_reward,
            "eta_s": row.eta_s, "job": row.ref.job, "job_alive": row.job_alive, "finished": row.finished,
            "last_metrics": row.last_metrics}


def status_document(root: Path, rows: Sequence[RunProgress]) -> Dict[str, Any]:
    """The whole document: ``root``, ``summary``, ``states`` (runs per state), ``eta_s`` and ``runs``."""
    return {"root": str(root), "summary": summary(rows) if rows else f"no runs under {root}", "states": dict(Counter(row.state for row in rows)),
            "eta_s": overall_eta(rows), "runs": [run_json(row) for row in rows]}


def status_json(root: Path, rows: Sequence[RunProgress]) -> str:
    """``status_document`` as indented JSON text (strict: no NaN)."""
    return json.dumps(status_document(root, rows), indent=2, allow_nan=False)
