"""Compose and validate the config of every run of a sweep, before anything is written or submitted.

Override order for a run: the spec's launcher (``launcher=<spec launcher>``), the spec's common
``overrides``, the base variant's overrides, the command line's overrides, the variant's own overrides,
then the run's bookkeeping: ``sweep``, ``variant`` (the run folder's name), ``seed`` (with several seeds)
and ``out`` = the run directory relative to the results root, ``<sweep>/<run>`` (the run is trained in its
folder wherever the results root is copied or moved). Later overrides win, so command-line
overrides apply to every variant while each variant keeps the axis it changes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

from omegaconf import DictConfig

from rlscale.config import ConfigError, compose_run_config
from rlscale.sweep.expand import Run
from rlscale.sweep.spec import SpecError, SweepSpec, single_line


@dataclass(frozen=True)
class ResolvedRun:
    """A run with its validated, resolved config and its run directory (absolute)."""

    run: Run
    overrides: Tuple[str, ...]
    cfg: DictConfig
    run_dir: Path


def hydra_quote(value: str) -> str:
    """A Hydra override value that reads back as exactly ``value`` (a single-quoted string)."""
    value = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    return "'" + value.replace("'", "\\'") + "'"


def results_root(results: Path) -> Path:
    """The absolute results root; it reaches configs (no ``${``) and job scripts (no control characters)."""
    root = Path(results).expanduser().resolve()
    if "${" in str(root):
        raise SpecError(f"--results {results}: the path must not contain '${{' (read as an interpolation)")
    return Path(single_line(str(root), "--results"))


def run_overrides(spec: SweepSpec, run: Run, cli: Sequence[str], run_dir: Path) -> Tuple[str, ...]:
    """The full override list composing ``run`` (see the module docstring for the order)."""
    bookkeeping = [f"sweep={spec.name}", f"variant={run.name}", f"out={hydra_quote(run_dir.as_posix())}"]
    if run.seed is not None:
        bookkeeping.insert(2, f"seed={run.seed}")
    return (f"launcher={spec.launcher}", *spec.overrides, *spec.base.overrides, *cli, *run.overrides,
            *bookkeeping)


def resolve_runs(spec: SweepSpec, runs: Sequence[Run], cli: Sequence[str], results: Path) -> List[ResolvedRun]:
    """Compose every run; the first invalid one raises ``SpecError`` naming the spec, the variant and the
    override or field at fault. All runs must use the same launcher."""
    root = results_root(results)
    resolved: List[ResolvedRun] = []
    for run in runs:
        run_dir = root / spec.name / run.name
        overrides = run_overrides(spec, run, cli, run_dir.relative_to(root))
        try:
            cfg = compose_run_config(overrides, config_name=run.config)
        except ConfigError as err:
            message = str(err).split(" Config search path:")[0].replace(f"overrides {' '.join(overrides)}: ", "")
            raise SpecError(f"{spec.path}: variant '{run.variant}': {message}") from None
        resolved.append(ResolvedRun(run=run, overrides=overrides, cfg=cfg, run_dir=run_dir))
    launchers = sorted({r.cfg.launcher.name for r in resolved})
    if len(launchers) > 1:
        raise SpecError(f"{spec.path}: field 'launcher': the variants resolve to several launchers "
                        f"({', '.join(launchers)}); set one with launcher=local|slurm")
    return resolved
