"""Expand a sweep spec into its runs: variants (LOO reversions, list entries or grid cells) times seeds.

With one seed a run's folder is the variant's name and its seed is the config's; with N seeds each
variant gets N runs ``<variant>_s<k>`` with ``seed=k`` (k = 0..N-1), the independent runs the paper
uses to bound the fit's error on A (App. A.7). Seeds chosen by value and a subset of the variants come from
rlscale.sweep.selection (``--seeds 10-12``, ``--only``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

from rlscale.sweep.selection import SeedChoice, pick_variants
from rlscale.sweep.spec import SpecError, SweepSpec, check_name


@dataclass(frozen=True)
class Run:
    """One run of a sweep. ``overrides`` are the variant's own (applied after the sweep's common ones);
    ``axis`` is the LOO axis reverted (None for the base and for non-LOO sweeps; the varied keys of a
    grid cell); ``seed`` is set only when the sweep has several seeds or chosen ones."""

    variant: str
    name: str
    config: str
    overrides: Tuple[str, ...]
    axis: Optional[str]
    seed: Optional[int]


def override_key(override: str) -> str:
    """The dotted key an override sets: ``++loss.eps_high=0.3`` -> ``loss.eps_high``."""
    return override.split("=", 1)[0].lstrip("+~")


def _loo_axis(spec: SweepSpec, name: str, overrides: Tuple[str, ...]) -> str:
    axes = sorted({override_key(o).split(".", 1)[0] for o in overrides})
    if len(axes) != 1:
        raise SpecError(f"{spec.path}: field 'variants.{name}': a leave-one-out variant reverts exactly one "
                        f"axis, got {len(axes)} ({', '.join(axes) or 'no overrides'})")
    return axes[0]


def _variants(spec: SweepSpec) -> List[Tuple[str, str, Tuple[str, ...], Optional[str]]]:
    """(name, root config, own overrides, axis) of every variant, base first (grid: cells in order)."""
    if spec.kind == "grid":
        cells = []
        for combo in itertools.product(*(axis.options for axis in spec.axes)):
            name = "_".join(label for label, _ in combo)
            overrides = tuple(o for _, ovs in combo for o in ovs)
            varied = ",".join(axis.name for axis in spec.axes)
            cells.append((check_name(name, f"{spec.path}: grid cell"), spec.base.config, overrides, varied))
        names = [c[0] for c in cells]
        if spec.base.name not in names:
            raise SpecError(f"{spec.path}: field 'base.name': {spec.base.name!r} is not a grid cell "
                            f"(cells: {', '.join(names)})")
        if len(set(names)) != len(names):
            raise SpecError(f"{spec.path}: field 'axes': two grid cells share a name; relabel the options")
        return [(n, c, o, None if n == spec.base.name else a) for n, c, o, a in cells]
    base = (spec.base.name, spec.base.config, (), None)
    rest = [(v.name, v.config, v.overrides, _loo_axis(spec, v.name, v.overrides) if spec.kind == "loo" else None)
            for v in spec.variants]
    return [base] + rest


def expand(spec: SweepSpec, seeds: Union[int, SeedChoice, None] = None,
           only: Optional[Tuple[str, ...]] = None) -> List[Run]:
    """Every run of the sweep, or of the variants ``only`` names. ``seeds`` (the ``--seeds`` option: a
    count or a SeedChoice) replaces the spec's ``seeds``."""
    choice = seeds if isinstance(seeds, SeedChoice) else SeedChoice.count(spec.seeds if seeds is None else seeds)
    variants = _variants(spec)
    kept = pick_variants([v[0] for v in variants], only, spec.path)
    runs: List[Run] = []
    for name, config, overrides, axis in (v for v in variants if v[0] in kept):
        if not choice.named:
            runs.append(Run(variant=name, name=name, config=config, overrides=overrides, axis=axis, seed=None))
            continue
        for k in choice.values:
            runs.append(Run(variant=name, name=check_name(f"{name}_s{k}", f"{spec.path}: run"), config=config,
                            overrides=overrides, axis=axis, seed=k))
    names = [r.name for r in runs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise SpecError(f"{spec.path}: two runs would share the folder {duplicate!r}; rename a variant")
    return runs
