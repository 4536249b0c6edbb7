"""A config field with its documentation, its paper section and its bounds, and the check of those bounds.

Every field of the run's configuration is declared with ``knob``: the typed sections of ``rlscale.config.schema``
and the config class of each option of an axis, which lives beside the option's code (``rlscale.rl.losses``'
``CispoConfig``: the loss and its knobs in one module). ``bound_problems`` checks a built config against the bounds
its fields declare, one line per problem naming the dotted field, and the configuration reference
(``rlscale.config.reference``) prints each bound beside its field's documentation, so a bound is written once.
This module imports nothing of rlscale, so any layer may use it.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Iterator, List, Optional, Sequence, Tuple

BOUNDS = ("gt", "ge", "lt", "le")
_SYMBOL = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def knob(default: Any, doc: str, paper: str = "", *, gt: Optional[float] = None, ge: Optional[float] = None,
         lt: Optional[float] = None, le: Optional[float] = None, one_of: Optional[Sequence[Any]] = None) -> Any:
    """A dataclass field with its documentation, paper section (empty: no counterpart in the paper) and bounds:
    ``gt``/``ge``/``lt``/``le`` for numbers (a None value, where the field allows one, is not checked; the bounds of
    a list of numbers hold for each item), ``one_of`` for a closed set of values."""
    meta = {"doc": doc, "paper": paper, "one_of": tuple(one_of) if one_of is not None else None,
            **{name: value for name, value in zip(BOUNDS, (gt, ge, lt, le))}}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def bound_text(f: dataclasses.Field) -> str:
    """The bounds of field ``f`` as the reference prints them (``> 0``, ``in [0, 1)``, ``one of a, b``; ``or null``
    where the field may be None), or ""."""
    meta = f.metadata
    if meta.get("one_of"):
        return "one of " + ", ".join(str(v) for v in meta["one_of"])
    lower = next(((name, meta[name]) for name in ("gt", "ge") if meta.get(name) is not None), None)
    upper = next(((name, meta[name]) for name in ("lt", "le") if meta.get(name) is not None), None)
    if lower and upper:
        text = (f"in {'(' if lower[0] == 'gt' else '['}{_number(lower[1])}, {_number(upper[1])}"
                f"{')' if upper[0] == 'lt' else ']'}")
    elif lower or upper:
        bound = lower or upper
        text = f"{_SYMBOL[bound[0]]} {_number(bound[1])}"
    else:
        return ""
    return text + (" or null" if "Optional" in str(f.type) else "")


def _number(value: float) -> str:
    """An integer bound exactly (2^63 - 1 is 9223372036854775807), any other in its shortest form."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _violates(f: dataclasses.Field, value: Any) -> bool:
    meta = f.metadata
    if meta.get("one_of") is not None:
        return value not in meta["one_of"]
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return any(meta.get(name) is not None and not _holds(name, value, meta[name]) for name in BOUNDS)


def _holds(name: str, value: float, bound: float) -> bool:
    return {"gt": value > bound, "ge": value >= bound, "lt": value < bound, "le": value <= bound}[name]


def bound_problems(config: Any, where: str) -> List[str]:
    """Every value of the dataclass instance ``config`` (nested dataclasses and lists of them included) that is a
    NaN or an infinity, or outside its field's bounds: ``field 'WHERE.NAME': must be > 0, got -1``."""
    problems = []
    for dotted, f, value in _fields(config, where):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"field '{dotted}': must be a finite number, got {value}")
        elif _violates(f, value):
            problems.append(f"field '{dotted}': must be {bound_text(f)}, got {value!r}")
    return problems


def _fields(config: Any, where: str) -> Iterator[Tuple[str, dataclasses.Field, Any]]:
    """(dotted name, field, value) of every field of ``config``, depth first."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        dotted = f"{where}.{f.name}" if where else f.name
        yield dotted, f, value
        if dataclasses.is_dataclass(value):
            yield from _fields(value, dotted)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    yield from _fields(item, f"{dotted}[{i}]")
                elif isinstance(item, (int, float)):
                    yield f"{dotted}[{i}]", f, item
