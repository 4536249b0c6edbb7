"""metrics.jsonl: appended one line at a time, never rewritten.

Each line carries ``step``, ``kind`` ("train" | "eval") and the compute so far in every unit:
``gpu_hours`` on CUDA (device wall-seconds x devices / 3600) or ``core_hours`` on CPU (process
CPU-seconds / 3600), never both; analytic ``flops``, ``samples``, ``tokens`` always. Eval lines add
``val_reward``, its standard error over prompts ``val_reward_se`` and ``val_samples``. Readers tolerate a torn last line (a killed writer) and
duplicate steps after a resume (the last line for a (kind, step) wins).

The reader validates every line against this contract and isolates what breaks it: a line whose
``step`` is not an integer >= 0 or whose ``kind`` is not a string is skipped; a compute unit or
``val_*`` field that is not a number is dropped from its line (non-finite numbers stay: the fit drops
and counts them). Skipped lines are counted per reason with the first few line numbers, lines are
streamed and a line longer than ``MAX_LINE_BYTES`` is skipped unread, so any file costs bounded memory
and a bounded message.
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

COMPUTE_UNITS = ("gpu_hours", "core_hours", "flops", "samples", "tokens", "step")
MEASURED_FIELDS = frozenset({"compile_s", "core_hours", "eval_s", "generator_idle_frac", "gpu_hours", "queue_depth",
                             "samples_per_s", "startup_s", "step_seconds", "tokens_per_s", "trainer_wait_s",
                             "weight_load_s", "weight_sync_s"})
"""The fields a run measures with the clock rather than computes: two runs of one config (a resumed run and an
uninterrupted one) differ in these only."""
MAX_LINE_BYTES = 1 << 20  # a real line is a few hundred bytes
FIRST_LINES_SHOWN = 3


class MetricsWriteError(RuntimeError):
    """A metrics line the file system would not take; the message is one line naming the file and the cause."""


class MetricsLog:
    """Append-only writer of one run's metrics.jsonl (each line flushed and fsynced), then mirrored to
    ``sinks`` (experiment trackers, a progress display: rlscale.tracking)."""

    def __init__(self, path: Path, sinks: Sequence = ()):
        self.path = Path(path)
        self.sinks = tuple(sinks)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        """A writer killed mid-line leaves a partial last line; cut it so appends start on a clean line."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as fh:
            end = fh.seek(0, os.SEEK_END)
            position = end
            while position > 0:  # look back for the last newline, a block at a time
                start = max(0, position - 65536)
                fh.seek(start)
                block = fh.read(position - start)
                if position == end and block.endswith(b"\n"):
                    return
                newline = block.rfind(b"\n")
                if newline >= 0:
                    fh.truncate(start + newline + 1)
                    return
                position = start
            fh.truncate(0)

    def append(self, record: Dict) -> None:
        """Append one line; a write the file system refuses (a full disk) is a MetricsWriteError naming the
        file, and what it had taken of the line is cut again, so the file still ends at a line end. A line a
        kill cut short is cut by the next writer (``_drop_torn_tail``) and skipped by readers."""
        data = (json.dumps(record, sort_keys=True, allow_nan=True) + "\n").encode("utf-8")
        try:
            with open(self.path, "ab", buffering=0) as fh:
                end = fh.seek(0, os.SEEK_END)
                try:
                    written = 0
                    while written < len(data):
                        written += fh.write(data[written:])
                    os.fsync(fh.fileno())
                except OSError:
                    fh.truncate(end)  # giving space back: a full disk allows it
                    raise
        except OSError as err:
            raise MetricsWriteError(f"{self.path}: cannot append the step-{record.get('step')} line: "
                                    f"{(err.strerror or str(err)).lower()}") from None
        for sink in self.sinks:
            sink.write(record)


class _Skips:
    """Skipped lines by reason: a count and the first line numbers (bounded whatever the file)."""

    def __init__(self) -> None:
        self.count: Dict[str, int] = defaultdict(int)
        self.first: Dict[str, List[int]] = defaultdict(list)

    def add(self, reason: str, number: int) -> None:
        self.count[reason] += 1
        if len(self.first[reason]) < FIRST_LINES_SHOWN:
            self.first[reason].append(number)

    def messages(self, name: str) -> List[str]:
        out = []
        for reason, n in self.count.items():
            where = ", ".join(map(str, self.first[reason]))
            if n == 1:
                out.append(f"{name}: {reason} skipped (line {where})")
            else:
                out.append(f"{name}: {n} {reason.replace('line', 'lines', 1)} skipped (first at lines {where})")
        return out


def _lines(fh) -> Iterator[Tuple[int, bytes, bool]]:
    """(number, line without its newline, too long) for every line; an overlong line is not kept."""
    number = 0
    while True:
        chunk = fh.readline(MAX_LINE_BYTES)
        if not chunk:
            return
        number += 1
        if chunk.endswith(b"\n") or len(chunk) < MAX_LINE_BYTES:
            yield number, chunk.rstrip(b"\n"), False
            continue
        while chunk and not chunk.endswith(b"\n"):  # skip the rest of the overlong line
            chunk = fh.readline(MAX_LINE_BYTES)
        yield number, b"", True


def _problem(rec) -> str:
    """Why a parsed line breaks the contract ('' when it does not)."""
    if not isinstance(rec, dict) or "step" not in rec:
        return "line without 'step'"
    step = rec["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return "line with a non-integer 'step'"
    if not isinstance(rec.get("kind", "train"), str):
        return "line with a non-string 'kind'"
    return ""


def _drop_non_numbers(rec: dict) -> int:
    """Remove compute units and ``val_*`` fields that are not numbers; return how many."""
    bad = [k for k, v in rec.items() if (k in COMPUTE_UNITS[:-1] or k.startswith("val_"))
           and not (isinstance(v, (int, float)) and not isinstance(v, bool))]
    for key in bad:
        del rec[key]
    return len(bad)


def read_metrics(path: Path) -> Tuple[List[Dict], List[str]]:
    """Read metrics lines, deduplicated by (kind, step) keeping the last, sorted by step.

    Returns (records, warnings); lines that break the contract are skipped and counted, never raised."""
    path = Path(path)
    by_key: Dict[Tuple[str, int], Dict] = {}
    skips = _Skips()
    duplicates = dropped = 0
    torn = None
    try:
        with open(path, "rb") as fh:
            for number, raw, too_long in _lines(fh):
                if not (too_long or raw.strip()):
                    continue
                if torn is not None:  # the unparseable line was not the last one after all
                    skips.add("unparseable line", torn)
                    torn = None
                if too_long:
                    skips.add(f"line over {MAX_LINE_BYTES // 1024} KiB", number)
                    continue
                try:
                    rec = json.loads(raw.decode("utf-8", errors="replace")) if raw.lstrip()[:1] == b"{" else None
                except (ValueError, RecursionError):
                    rec = None
                if rec is None:
                    torn = number
                    continue
                problem = _problem(rec)
                if problem:
                    skips.add(problem, number)
                    continue
                dropped += _drop_non_numbers(rec)
                key = (rec.get("kind", "train"), rec["step"])
                duplicates += key in by_key
                by_key[key] = rec
    except OSError as err:
        return [], [f"{path}: {err.strerror or err}"]
    warnings = skips.messages(path.name)
    if torn is not None:
        warnings.append(f"{path.name}: torn last line skipped (line {torn})")
    if dropped:
        warnings.append(f"{path.name}: {dropped} non-numeric compute or val_ value(s) ignored")
    if duplicates:
        warnings.append(f"{path.name}: {duplicates} duplicate step line(s), e.g. after a resume: the last one kept")
    records = sorted(by_key.values(), key=lambda r: (r["step"], r.get("kind", "train") == "eval"))
    return records, warnings


def is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
