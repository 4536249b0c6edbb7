"""Checkpoints: one file, written to a temporary name then renamed (atomic), holding everything a
resume needs to reproduce the uninterrupted run: weights, optimizer, RNG states, the data position,
the curriculum's pass-rate history, pending off-policy batches, compute so far, and the size of
metrics.jsonl at that step (lines written after it are cut on resume, then written again identically).

A resume never deletes metrics it cannot reproduce: without a readable checkpoint, metrics.jsonl may
only hold the step-0 eval (a run killed before its first checkpoint), which the restart writes again;
anything more refuses the resume with one line naming the checkpoint (``check_resumable``).
"""
from __future__ import annotations

import errno
import json
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from rlscale.results.atomic import atomic_write
from rlscale.results.errors import Refused

CHECKPOINT = "checkpoints/last.pt"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written; the message is one line naming the file and the cause."""


class ResumeRefused(Refused):
    """A run folder whose metrics go beyond step 0 but whose checkpoint is missing or unreadable."""


def save_checkpoint(run_dir: Path, state: Dict[str, Any]) -> None:
    path = Path(run_dir) / CHECKPOINT
    try:
        atomic_write(path, lambda tmp: _save(state, tmp))
    except (OSError, RuntimeError) as err:
        raise CheckpointError(f"{path}: cannot write the checkpoint: {_cause(err)}") from None


def _save(state: Dict[str, Any], tmp: Path) -> None:
    with open(tmp, "wb") as fh:  # a Python file: a failed write leaves its OSError (errno) in the chain
        torch.save(state, fh)


def _cause(err: BaseException) -> str:
    """The OSError behind ``err`` (torch reports a short write as 'unexpected pos'), in words."""
    seen = err
    while seen is not None and not isinstance(seen, OSError):
        seen = seen.__cause__ or seen.__context__
    if isinstance(seen, OSError):
        return "no space left on device" if seen.errno == errno.ENOSPC else (seen.strerror or str(seen))
    return " ".join(str(err).split())[:300]


def load_checkpoint(run_dir: Path) -> Optional[Dict[str, Any]]:
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch.load raises many types for a damaged file
        raise ResumeRefused(f"{path}: unreadable checkpoint ({type(err).__name__}); metrics.jsonl kept; "
                            "restore the file or start over with --force") from None


def check_resumable(run_dir: Path) -> None:
    """Raise ``ResumeRefused`` unless the run can start or resume without losing metrics: its checkpoint
    is a complete file, or there is none and metrics.jsonl holds nothing beyond step 0."""
    run_dir = Path(run_dir)
    path = run_dir / CHECKPOINT
    if path.exists():
        try:
            with zipfile.ZipFile(path):  # torch.save's format; a truncated file has no central directory
                return
        except (OSError, zipfile.BadZipFile) as err:
            raise ResumeRefused(f"{path}: unreadable checkpoint ({' '.join(str(err).split())}); metrics.jsonl "
                                "kept; restore the file or start over with --force") from None
    if not unsaved_start_only(run_dir / "metrics.jsonl"):
        raise ResumeRefused(f"{path}: missing, but {run_dir / 'metrics.jsonl'} holds steps after 0; nothing "
                            "deleted; restore the checkpoint or start over with --force")


def unsaved_start_only(metrics: Path) -> bool:
    """Whether ``metrics`` is absent or holds only step-0 lines (written again by a restart)."""
    if not metrics.exists():
        return True
    with open(metrics, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if line.endswith(b"\n"):
                    return False
                continue  # a torn last line: the writer was killed while writing it
            if not isinstance(record, dict) or record.get("step") != 0:
                return False
    return True
