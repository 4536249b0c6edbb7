"""Range checks of numeric command-line options: each command lists its options with a ``Range`` in one
place, and ``check_ranges`` turns the first value out of range, NaN or infinite into an ``OptionError``
naming the option (the command prints it as one line and exits 2), before any work."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Tuple


class OptionError(ValueError):
    """A numeric option out of its range; the message names the option."""


@dataclass(frozen=True)
class Range:
    """A finite number, optionally bounded: ``lo``/``hi`` inclusive unless ``open_lo``/``open_hi``."""

    lo: Optional[float] = None
    hi: Optional[float] = None
    open_lo: bool = False
    open_hi: bool = False

    def describe(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.open_lo else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"{'<' if self.open_hi else '<='} {self.hi:g}")
        return "a finite number" + (f" {' and '.join(parts)}" if parts else "")

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        below = self.lo is not None and (value <= self.lo if self.open_lo else value < self.lo)
        above = self.hi is not None and (value >= self.hi if self.open_hi else value > self.hi)
        return not (below or above)


FINITE = Range()
NON_NEGATIVE = Range(lo=0)
OPEN_UNIT = Range(lo=0, hi=1, open_lo=True, open_hi=True)


def check_ranges(options: Dict[str, Tuple[Any, Range]]) -> None:
    """``{"--margin": (value, NON_NEGATIVE), ...}``; None values (options not given) pass; a list value
    (a repeatable option) is checked item by item."""
    for name, (value, allowed) in options.items():
        for item in _items(value):
            if not allowed.holds(item):
                raise OptionError(f"{name} must be {allowed.describe()} (got {item!r})")


def _items(value: Any) -> Iterable[Any]:
    if value is None:
        return ()
    return value if isinstance(value, (list, tuple)) else (value,)
