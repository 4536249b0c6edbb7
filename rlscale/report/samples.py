"""Sample completions to read: a run's samples.jsonl (written at every eval by the trainer: prompt,
completion with its think trace, extracted answer, reference, verdict, policy version). The report shows
those of the first and the last eval, so a reader sees what the policy wrote before and after training."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

SAMPLES_JSONL = "samples.jsonl"


@dataclass(frozen=True)
class Sample:
    step: int
    prompt: str
    completion: str
    answer: Optional[str]
    reference: str
    correct: bool
    reward: float


def _sample(record: dict) -> Optional[Sample]:
    try:
        answer = record.get("answer")
        return Sample(int(record["step"]), str(record["prompt"]), str(record["completion"]),
                      None if answer is None else str(answer), str(record.get("reference", "")),
                      bool(record.get("correct", False)), float(record.get("reward", 0.0)))
    except (KeyError, TypeError, ValueError):
        return None


def read_samples(run_dir: Path) -> Tuple[List[Sample], int]:
    """(the samples of the first and the last eval, the number of evals with samples); a missing file
    gives none, and unreadable lines (a torn last line) are skipped."""
    try:
        lines = (Path(run_dir) / SAMPLES_JSONL).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [], 0
    samples = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        sample = _sample(record) if isinstance(record, dict) else None
        if sample is not None:
            samples.append(sample)
    steps = sorted({s.step for s in samples})
    shown = {steps[0], steps[-1]} if steps else set()
    return [s for s in samples if s.step in shown], len(steps)
