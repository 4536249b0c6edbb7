"""``rlscale plan``: what a compute budget buys, read from the fitted curves (Section 5: the paper fits at
half the target budget and extrapolates; Fig. 9's batch-size crossover: smaller batches win early, larger
ones later).

Per sweep, at the budget C (in the fit's x unit):

- **best**: the variants' predicted rewards at C with intervals (rlscale.fit.predict), cut into tiers by the
  transitive rule of rlscale.fit.ranking; the top tier is the best, a tie when it holds several variants
  (their differences at C are not resolved beyond the margin);
- **crossovers**: each compute in (first fitted point, C] where two variants' seed-mean curves cross
  (which one leads before and after), found by bracketing sign changes on a log grid and refining with
  Brent's method;
- **setting**: for a scaling sweep (variants that differ in ``batch.prompts``, ``batch.generations`` or the
  generation length), the values of the varying overrides in the top tier, i.e. the setting that
  maximises the predicted reward at C.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Dict, List, Optional, Sequence

import numpy as np
from scipy.optimize import brentq

from rlscale.fit.predict import VariantPrediction, predict_variants, predicted_tiers
from rlscale.fit.schema import FitSettings, RunFit

PLAN_JSON = "plan.json"
SCALE_KEYS = ("batch.prompts", "batch.generations", "generation.max_think_tokens", "generation.max_tokens")
GRID_POINTS = 512


@dataclass(frozen=True)
class PlannedVariant:
    """A variant's predicted reward at the budget, its interval, tier (1 = best) and whether its A is
    identified (an unidentified prediction is an extrapolation of a curve that has not bent)."""

    variant: str
    predicted: float
    lo: Optional[float]
    hi: Optional[float]
    tier: int
    seeds: int
    identified: bool
    setting: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Crossover:
    """Two variants' curves cross at ``x``: ``before`` leads below it, ``after`` above it."""

    x: float
    before: str
    after: str
    reward: float


@dataclass(frozen=True)
class SweepPlan:
    """The plan of one sweep at ``budget``. ``best`` is the top tier (several names: a tie);
    ``scaling_keys`` the overrides that vary among its variants when they include a scaling axis, and
    ``best_setting`` their values in the top tier."""

    sweep: str
    budget: float
    x: str
    best: List[str]
    variants: List[PlannedVariant]
    crossovers: List[Crossover]
    scaling_keys: List[str]
    best_setting: List[Dict[str, str]]


def plan_sweeps(runs: Sequence[RunFit], sweeps: Dict[str, dict], settings: FitSettings,
                budget: float) -> List[SweepPlan]:
    """The plan of every sweep of ``runs`` at ``budget`` (``sweeps``: sweep.json by sweep name)."""
    by_sweep: Dict[str, List[RunFit]] = {}
    for run in runs:
        by_sweep.setdefault(run.sweep, []).append(run)
    plans = []
    for sweep, members in sorted(by_sweep.items()):
        predictions = predict_variants(members, settings, budget)
        if predictions:
            plans.append(_plan(sweep, predictions, sweeps.get(sweep) or {}, settings, budget))
    return plans


def _plan(sweep: str, predictions: List[VariantPrediction], record: dict, settings: FitSettings,
          budget: float) -> SweepPlan:
    settings_of = variant_settings(record)
    varying = sorted({k for s in settings_of.values() for k in s
                      if len({str(other.get(k)) for other in settings_of.values()}) > 1})
    scaling = varying if any(k in SCALE_KEYS for k in varying) else []
    groups = predicted_tiers(predictions, settings.margin, settings.ci_level)
    rows = [PlannedVariant(variant=p.variant, predicted=p.value, lo=p.lo, hi=p.hi, tier=tier, seeds=len(p.runs),
                           identified=p.identified, setting={k: settings_of.get(p.variant, {}).get(k, "base")
                                                              for k in scaling})
            for tier, group in enumerate(groups, start=1) for p in group]
    best = [row for row in rows if row.tier == 1]
    return SweepPlan(sweep=sweep, budget=budget, x=settings.x, best=[r.variant for r in best], variants=rows,
                     crossovers=crossovers(predictions, budget), scaling_keys=scaling,
                     best_setting=[r.setting for r in best] if scaling else [])


def variant_settings(record: dict) -> Dict[str, Dict[str, str]]:
    """Each variant's own overrides of a sweep.json as {key: value} (the base has none: the config's)."""
    out: Dict[str, Dict[str, str]] = {}
    for v in record.get("variants", []):
        pairs = (o.split("=", 1) for o in v.get("overrides", []) if "=" in o)
        out.setdefault(v["name"], {k.lstrip("+~"): val for k, val in pairs})
    return out


def crossovers(predictions: Sequence[VariantPrediction], budget: float) -> List[Crossover]:
    """Where two variants' seed-mean curves cross between their first fitted point and ``budget``."""
    lo = min(min(x for x in r.points_x if x > 0) for p in predictions for r in p.runs)
    grid = np.geomspace(lo, budget, GRID_POINTS) if budget > lo else np.empty(0)
    out = []
    for p, q in combinations(predictions, 2):
        diff = p.curve(grid) - q.curve(grid)
        for i in np.flatnonzero(np.sign(diff[:-1]) * np.sign(diff[1:]) < 0):
            x = brentq(lambda c: float(p.curve(c) - q.curve(c)), grid[i], grid[i + 1])
            before, after = (p, q) if diff[i] > 0 else (q, p)
            out.append(Crossover(x=float(x), before=before.variant, after=after.variant,
                                 reward=float(p.curve(x))))
    return sorted(out, key=lambda c: (c.x, c.before, c.after))


def plan_json(plans: Sequence[SweepPlan], settings: FitSettings) -> dict:
    """plan.json's content."""
    return {"x": settings.x, "margin": settings.margin, "ci_level": settings.ci_level,
            "sweeps": [asdict(p) for p in plans]}
