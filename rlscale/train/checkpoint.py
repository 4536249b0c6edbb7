"""Checkpoints: one file, written to a temporary name then renamed (atomic), holding everything a
resume needs to reproduce the uninterrupted run: weights, optimizer, RNG states, the data position,
the curriculum's pass-rate history, pending off-policy batches, compute so far, and the size of
metrics.jsonl at that step (lines written after it are cut on resume, then written again identically).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import torch

from rlscale.results.atomic import atomic_write

CHECKPOINT = "checkpoints/last.pt"


def save_checkpoint(run_dir: Path, state: Dict[str, Any]) -> None:
    atomic_write(Path(run_dir) / CHECKPOINT, lambda tmp: torch.save(state, tmp))


def load_checkpoint(run_dir: Path) -> Optional[Dict[str, Any]]:
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)
