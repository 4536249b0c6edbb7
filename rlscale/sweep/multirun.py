"""``rlscale run -m``: Hydra's multirun as a grid sweep. The overrides are parsed by Hydra's grammar
(rlscale.config.overrides): every sweep override (``loss=cispo,dapo``, ``choice(...)``, ``range(4,12,4)``,
``glob(c*)`` over a config group's options) is an axis of a grid spec, its values expanded as Hydra's basic
sweeper expands them, the others apply to every cell, and the first cell is the base. Without a sweep override
the grid is one cell, named like the folder of a plain ``rlscale run`` with those overrides
(rlscale.runfolder.names.run_name). The spec is written into the results root as ``<name>.yaml`` and run by
``rlscale sweep``, so rerunning the same command resumes it. Seeds are runs of each cell (``--seeds``), never
a grid axis, so ``rlscale fit`` treats them as seeds."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from rlscale.config import ConfigError
from rlscale.config.overrides import Swept, split_sweeps
from rlscale.runfolder import atomic_write_text
from rlscale.runfolder.names import label, run_name
from rlscale.sweep.spec import SpecError, check_name

NAME = "multirun"
ONE_CELL = "run"  # the axis of a grid without sweep overrides


def grid_axes(sweeps: Sequence[Swept], fixed: Sequence[str]) -> Dict[str, Dict[str, List[str]]]:
    """The ``axes`` of the grid spec: each sweep's values labelled ``<last part of its key>-<value>`` (the label
    of a grid spec's value list, rlscale.sweep.spec), as ``{key: {label: [key=value]}}`` so a quoted value
    keeps its quotes; one cell named ``run_name(fixed)`` without sweeps."""
    if not sweeps:
        return {ONE_CELL: {run_name(fixed): []}}
    axes = {}
    for sweep in sweeps:
        leaf = sweep.key.lstrip("+~").rsplit(".", 1)[-1]
        axes[sweep.key] = {label(f"{leaf}-{value}"): [override]
                           for value, override in zip(sweep.values, sweep.overrides)}
        if len(axes[sweep.key]) < len(sweep.values):
            raise SpecError(f"-m {sweep.key}: two values get the folder label "
                            f"{next(iter(axes[sweep.key]))!r}; pass values that differ in letters or digits")
    return axes


def multirun_spec(overrides: Sequence[str], config_name: str = "config", name: str = NAME,
                  seeds: Optional[int] = None) -> dict:
    """The grid spec of ``overrides`` (the single-valued ones apply to every cell), ``seeds`` runs of each
    cell (default 1)."""
    try:
        sweeps, fixed = split_sweeps(overrides)
    except ConfigError as err:
        raise SpecError(f"-m: {err}") from None
    seeded = next((s for s in sweeps if s.key.lstrip("+") == "seed"), None)
    if seeded:
        raise SpecError(f"-m seed={','.join(seeded.values)}: the seed would be a grid axis, and fit would not "
                        "treat the runs as seeds; pass --seeds N (seeds 0 to N-1 of every cell)")
    check_name(name, "--name")
    axes = grid_axes(sweeps, fixed)
    base = "_".join(next(iter(options)) for options in axes.values())
    return {"name": name, "kind": "grid", "description": "rlscale run -m " + shlex.join(overrides),
            "base": {"name": check_name(base, "-m: the first grid cell"), "config": config_name}, "axes": axes,
            "seeds": seeds or 1, "overrides": list(fixed)}


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
