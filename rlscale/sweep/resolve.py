"""Compose and validate the config of every run of a sweep, before anything is written or submitted.

Override order for a run: the spec's launcher (``launcher=<spec launcher>``), the spec's common
``overrides``, the base variant's overrides, the command line's overrides, the variant's own overrides,
then the run's bookkeeping: ``sweep``, ``variant`` (the run folder's name), ``seed`` (with several seeds)
and ``out`` = the run directory relative to the results root, ``<sweep>/<run>`` (the run is trained in its
folder wherever the results root is copied or moved). Later overrides win, so command-line
overrides apply to every variant while each variant keeps the axis it changes.

A shared override (the spec's, the base's or the command line's) that sets a knob of another option than a
variant's (``length.window``, interruption's, for the variant ``length=penalty``) is left out of that variant, and
the run's ``notes`` say so; a variant's own override of that kind is refused like any bad value.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

from omegaconf import DictConfig

from rlscale.config import ConfigError, compose_run_config
from rlscale.config.compose import ForeignKnob
from rlscale.config.overrides import hydra_quote
from rlscale.sweep.expand import Run
from rlscale.sweep.spec import SpecError, SweepSpec, single_line


@dataclass(frozen=True)
class ResolvedRun:
    """A run with its validated, resolved config and its run directory (absolute)."""

    run: Run
    overrides: Tuple[str, ...]
    cfg: DictConfig
    run_dir: Path
    notes: Tuple[str, ...] = ()


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


def _message(err: ConfigError, overrides: Sequence[str]) -> str:
    """The one line of ``err`` without the override list it repeats."""
    return str(err).split(" Config search path:")[0].replace(f"overrides {' '.join(overrides)}: ", "")


def resolve_runs(spec: SweepSpec, runs: Sequence[Run], cli: Sequence[str], results: Path) -> List[ResolvedRun]:
    """Compose every run; the first invalid one raises ``SpecError`` naming the spec, the variant and the
    override or field at fault. All runs must use the same launcher."""
    root = results_root(results)
    resolved: List[ResolvedRun] = []
    for run in runs:
        run_dir = root / spec.name / run.name
        overrides = run_overrides(spec, run, cli, run_dir.relative_to(root))
        shared = 1 + len(spec.overrides) + len(spec.base.overrides) + len(cli)  # the overrides every run gets
        notes: List[str] = []
        while True:
            try:
                cfg = compose_run_config(overrides, config_name=run.config)
                break
            except ForeignKnob as err:  # a shared knob of another option than this variant's: not for it
                dropped = [o for o in overrides[:shared] if o.lstrip("+").partition("=")[0] == err.field]
                if not dropped:
                    raise SpecError(f"{spec.path}: variant '{run.variant}': {_message(err, overrides)}") from None
                overrides = tuple(o for o in overrides if o not in dropped)
                shared -= len(dropped)
                notes.append(f"{dropped[0]} left out: {_message(err, overrides).partition(': ')[2]}")
            except ConfigError as err:
                raise SpecError(f"{spec.path}: variant '{run.variant}': {_message(err, overrides)}") from None
        resolved.append(ResolvedRun(run=run, overrides=overrides, cfg=cfg, run_dir=run_dir, notes=tuple(notes)))
    launchers = sorted({r.cfg.launcher.name for r in resolved})
    if len(launchers) > 1:
        raise SpecError(f"{spec.path}: field 'launcher': the variants resolve to several launchers "
                        f"({', '.join(launchers)}); set one with launcher=local|slurm")
    return resolved
