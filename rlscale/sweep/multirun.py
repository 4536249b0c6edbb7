"""``rlscale run -m``: Hydra's multirun as a grid sweep. Every override with comma-separated values is an
axis of a grid spec (``loss=cispo,dapo`` is ``axes: {loss: [cispo, dapo]}``), the others apply to every
cell, and the first cell is the base; the spec is written into the results root as ``<name>.yaml`` and run by
``rlscale sweep``, so rerunning the same command resumes it. Seeds are runs of each cell (``--seeds``), never
a grid axis, so ``rlscale fit`` treats them as seeds."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from rlscale.runfolder import atomic_write_text
from rlscale.sweep.spec import SpecError, check_name

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


def multirun_spec(overrides: Sequence[str], config_name: str = "config", name: str = NAME,
                  seeds: Optional[int] = None) -> dict:
    """The grid spec of ``overrides`` (the overrides without commas apply to every cell), ``seeds`` runs of
    each cell (default 1)."""
    axes, fixed = split_axes(overrides)
    if "seed" in axes:
        raise SpecError(f"-m seed={','.join(axes['seed'])}: the seed would be a grid axis, and fit would not "
                        "treat the runs as seeds; pass --seeds N (seeds 0 to N-1 of every cell)")
    check_name(name, "--name")
    base = "_".join(f"{key.rsplit('.', 1)[-1]}-{values[0]}" for key, values in axes.items())
    spec = {"name": name, "kind": "grid", "description": "rlscale run -m " + " ".join(overrides),
            "base": {"name": base, "config": config_name}, "axes": axes, "seeds": seeds or 1, "overrides": fixed}
    return spec


def write_multirun_spec(overrides: Sequence[str], results: Path, config_name: str = "config", name: str = NAME,
                        seeds: Optional[int] = None) -> Tuple[Path, bool]:
    """Write the grid spec to ``<results>/<name>.yaml`` and say whether it is new; the same grid again is
    left as it is (the sweep resumes), another grid under that name is refused, writing nothing."""
    spec = multirun_spec(overrides, config_name, name, seeds)
    path = Path(results) / f"{name}.yaml"
    if path.exists():
        if yaml.safe_load(path.read_text()) != spec:
            raise SpecError(f"{path}: another -m grid is saved under the name {name!r}; pass --name NEW for this "
                            f"one (or delete {path} to replace it)")
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(spec, sort_keys=False))
    return path, True
