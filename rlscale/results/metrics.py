"""metrics.jsonl: appended one line at a time, never rewritten.

Each line carries ``step``, ``kind`` ("train" | "eval") and the compute so far in every unit:
``gpu_hours`` on CUDA (device wall-seconds x devices / 3600) or ``core_hours`` on CPU (process
CPU-seconds / 3600), never both; analytic ``flops``, ``samples``, ``tokens`` always. Eval lines add
``val_reward``, its standard error over prompts ``val_reward_se`` and ``val_samples``. Readers tolerate a torn last line (a killed writer) and
duplicate steps after a resume (the last line for a (kind, step) wins).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Dict, List, Tuple

COMPUTE_UNITS = ("gpu_hours", "core_hours", "flops", "samples", "tokens", "step")


class MetricsLog:
    """Append-only writer of one run's metrics.jsonl (each line flushed and fsynced)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        """A writer killed mid-line leaves a partial last line; cut it so appends start on a clean line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def append(self, record: Dict) -> None:
        line = json.dumps(record, sort_keys=True, allow_nan=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def read_metrics(path: Path) -> Tuple[List[Dict], List[str]]:
    """Read metrics lines, deduplicated by (kind, step) keeping the last, sorted by step.

    Returns (records, warnings); unparseable lines are skipped with a warning, never raised."""
    warnings: List[str] = []
    by_key: Dict[Tuple[str, int], Dict] = {}
    duplicates = 0
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return [], [f"{path}: {err.strerror or err}"]
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            last = number == len(lines) or (number == len(lines) - 1 and lines[-1] == "")
            warnings.append(f"{path.name}:{number}: {'torn last line' if last else 'unparseable line'} skipped")
            continue
        if not isinstance(rec, dict) or "step" not in rec:
            warnings.append(f"{path.name}:{number}: line without 'step' skipped")
            continue
        key = (str(rec.get("kind", "train")), rec["step"])
        duplicates += key in by_key
        by_key[key] = rec
    if duplicates:
        warnings.append(f"{path.name}: {duplicates} duplicate step line(s), e.g. after a resume: the last one kept")
    records = sorted(by_key.values(), key=lambda r: (r["step"], r.get("kind", "train") == "eval"))
    return records, warnings


def is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
