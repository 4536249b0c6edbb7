"""``rlscale run -m``: Hydra's multirun as a grid sweep. Every override with comma-separated values is an
axis of a grid spec (``loss=cispo,dapo`` is ``axes: {loss: [cispo, dapo]}``), the others apply to every
cell, and the first cell is the base; the spec is written into the results root and run by ``rlscale
sweep``, so rerunning the same command resumes it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import yaml

from rlscale.results import atomic_write_text
from rlscale.sweep.spec import SpecError

NAME = "multirun"


def split_axes(overrides: Sequence[str]) -> Tuple[Dict[str, List[str]], List[str]]:
    """``(axes, fixed)``: comma-separated values (outside brackets and quotes) make an axis."""
    axes: Dict[str, List[str]] = {}
    fixed: List[str] = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and "," in value and value[0] not in "[{'\"" and not key.startswith(("+", "~")):
            axes[key] = value.split(",")
        else:
            fixed.append(item)
    if not axes:
        raise SpecError("-m/--multirun: no override with comma-separated values (e.g. loss=cispo,dapo)")
    return axes, fixed


def multirun_spec(overrides: Sequence[str], config_name: str = "config") -> dict:
    """The grid spec of ``overrides`` (the overrides without commas apply to every cell)."""
    axes, fixed = split_axes(overrides)
    base = "_".join(f"{key.rsplit('.', 1)[-1]}-{values[0]}" for key, values in axes.items())
    spec = {"name": NAME, "kind": "grid", "description": "rlscale run -m " + " ".join(overrides),
            "base": {"name": base, "config": config_name}, "axes": axes, "seeds": 1, "overrides": fixed}
    return spec


def write_multirun_spec(overrides: Sequence[str], results: Path, config_name: str = "config") -> Path:
    spec = multirun_spec(overrides, config_name)
    path = Path(results) / f"{NAME}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(spec, sort_keys=False))
    return path
