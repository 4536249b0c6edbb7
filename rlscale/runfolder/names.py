"""Names that become folders of the results tree, and folder names shown on a terminal.

A sweep, variant or run name becomes a folder name and a SLURM job name, so it is checked before
anything is written: [A-Za-z0-9_.-], starting with a letter or digit (no ``..``, no ``/``, no hidden
folder), at most ``MAX_NAME`` characters (a file name holds 255 bytes; the run name gets ``_s<k>`` and
the job name a prefix), and none of the files a sweep folder or a run folder holds. Folders found on
disk may be named anything; ``shown`` makes such a name safe to print (rich markup shown literally,
control characters as escapes).
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Optional, Sequence

from rich.markup import escape

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_NAME = 128
LOG_FILE = "train.log"  # a run's log lines (rlscale.train.logs)
RESERVED = frozenset({"sweep.json", "fits.json", "fits.csv", "comparison.csv", "report.html", "config.yaml",
                      "metrics.jsonl", "status.json", "checkpoints", "overrides.yaml", "versions.yaml", LOG_FILE})
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_UNPRINTABLE_BUT_LAYOUT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")  # tab and newline kept


def name_problem(name: Any) -> Optional[str]:
    """Why ``name`` cannot name a folder of the results tree, or None."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        return f"name {name!r} must match [A-Za-z0-9][A-Za-z0-9_.-]* (it names a folder)"
    if len(name) > MAX_NAME:
        return f"name {name[:20]!r}... is {len(name)} characters long, at most {MAX_NAME}"
    if name.lower() in RESERVED:
        return f"name {name!r} is reserved (a file of the results tree)"
    return None


UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
NAMED_BY = ("out", "variant", "sweep")  # overrides that place the run folder themselves
LONGEST = 80  # longer names are cut and end in a hash of the whole


def label(text: str) -> str:
    """``text`` as a folder name's part: each run of other characters than [A-Za-z0-9_.] as one ``-``
    (``loss='my loss'`` -> ``loss-my-loss``), none at either end."""
    return UNSAFE.sub("-", text).strip("-")


def run_name(overrides: Sequence[str], default: str = "run") -> str:
    """The folder name of a run composed with ``overrides``: each override as ``KEY-VALUE`` (``label``), sorted,
    joined by ``_`` (``batch.prompts-8_loss-dapo``), so a person tells runs apart and the same overrides in any
    order name the same folder; ``default`` without any. The overrides that place the folder themselves
    (``NAMED_BY``) are left out; a deletion ``~KEY`` reads ``no-KEY``. A name longer than ``LONGEST`` is cut and
    ends in 8 hex digits of a hash of the whole, so distinct runs keep distinct folders."""
    named = [o for o in overrides if o.lstrip("+~").partition("=")[0] not in NAMED_BY]
    parts = sorted(label(f"no-{o[1:]}" if o.startswith("~") else o.replace("=", "-", 1)) for o in named)
    name = "_".join(p for p in parts if p) or default
    if not SAFE_NAME.fullmatch(name):
        name = f"{default}-{name}"
    if len(name) > LONGEST:
        digest = hashlib.sha256("\n".join(sorted(named)).encode()).hexdigest()[:8]
        name = f"{name[:LONGEST - 9].rstrip('_.-')}-{digest}"
    return name


def printable(text: str, layout: bool = False) -> str:
    """``text`` with control characters (escape sequences, newlines) written as \\x.. escapes, and a byte that
    was not UTF-8 in a folder name (decoded by Python as a lone surrogate) as the \\x.. of that byte: the
    result can be printed, encoded as UTF-8 and drawn in a figure. ``layout``: tabs and newlines stay (text of
    several lines, such as a completion on a page)."""
    pattern = _UNPRINTABLE_BUT_LAYOUT if layout else _UNPRINTABLE
    return pattern.sub(lambda m: _escape(ord(m.group())), str(text))


def printable_tree(obj: Any) -> Any:
    """``obj`` (nested dicts and lists, as read from JSON) with every string made ``printable``."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, dict):
        return {printable_tree(k): printable_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable_tree(v) for v in obj]
    return obj


def _escape(code: int) -> str:
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogateescape of the byte code - 0xDC00
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` for a rich renderable that parses markup: printable, and brackets shown literally."""
    return escape(printable(text))
