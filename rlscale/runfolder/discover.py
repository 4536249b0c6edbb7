"""Find run directories (folders holding metrics.jsonl) under a results root, at any depth."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional


@dataclass(frozen=True)
class RunDir:
    """One run found on disk. ``sweep`` is the parent folder's name when it holds sweep.json (else the
    parent's name too, or "" at the root); ``variant`` is the run folder's name."""

    path: Path
    sweep: str
    variant: str

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"


def find_runs(root: Path) -> List[RunDir]:
    root = Path(root)
    runs = []
    for metrics in sorted(root.rglob("metrics.jsonl")):
        run = metrics.parent
        if "checkpoints" in run.relative_to(root).parts:
            continue
        sweep = run.parent.name if run != root else ""
        runs.append(RunDir(path=run, sweep=sweep, variant=run.name))
    return runs


def read_sweep_json(sweep_dir: Path) -> Optional[dict]:
    """sweep.json of a sweep folder, or None when missing or unreadable."""
    try:
        return json.loads((Path(sweep_dir) / "sweep.json").read_text())
    except (OSError, ValueError):
        return None
