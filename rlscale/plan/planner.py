"""``rlscale plan``: what a compute budget buys, read from the fitted curves (Section 5: the paper fits at
half the target budget and extrapolates; Fig. 9's batch-size crossover: smaller batches win early, larger
ones later).

Per sweep, at the budget C (in the fit's x unit):

- **best**: the variants' predicted rewards at C with intervals (rlscale.fit.predict), cut into tiers by the
  transitive rule of rlscale.fit.ranking; the top tier is the best, a tie when it holds several variants
  (their differences at C are not resolved beyond the margin at the level a Bonferroni correction over the
  tiers' n - 1 comparisons leaves to each, rlscale.fit.family; ``family`` says so);
- **crossovers**: each compute in (first fitted point, C] where two variants' seed-mean curves cross
  (which one leads before and after), found by bracketing sign changes on a log grid and refining with
  Brent's method;
- **setting**: for a scaling sweep (variants that differ in ``batch.prompts``, ``batch.generations`` or the
  generation length), the values of the varying overrides in the top tier, i.e. the setting that
  maximises the predicted reward at C; the run-length keys a spec varies to keep the budget equal
  (``trainer.max_steps``, ``trainer.eval_every``, ``trainer.checkpoint_every``) follow from the setting and
  are left out;
- **new seeds**: per variant, the prediction interval of the mean of k new seeds at C (rlscale.plan.new_seeds),
  and the seeds the plan saw with the compute each one's fit saw (``seen``), so that ``rlscale confirm`` can
  tell later runs that are evidence (new seeds, seen seeds run past C) from runs the plan was fitted on;
- **warning**: when C is more than EXTRAPOLATION_LIMIT times the largest compute the ranked runs reached
  (the paper reads its curves at 2x the fitted compute: LOO runs fitted to 8k and read at 16k GPU-hours,
  Section 5 fits at half the target budget), or below the smallest (every run is already past C: its
  observed reward answers better than a prediction).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Dict, List, Optional, Sequence

import numpy as np
from scipy.optimize import brentq

from rlscale.fit.predict import VariantPrediction, predict_variants, predicted_tiers, tier_family, variant_spread
from rlscale.fit.results import FitSettings, RunFit, axis_label
from rlscale.plan.new_seeds import NewSeeds, new_seeds

PLAN_JSON = "plan.json"
SCALE_KEYS = ("batch.prompts", "batch.generations", "generation.max_think_tokens", "generation.max_tokens")
RUN_LENGTH_KEYS = ("trainer.max_steps", "trainer.eval_every", "trainer.checkpoint_every")
GRID_POINTS = 512
EXTRAPOLATION_LIMIT = 4.0
NEW_SEEDS = 3  # default k of the new-seed prediction


@dataclass(frozen=True)
class SeenRun:
    """A run the plan was fitted on: its seed and the compute its fit saw (``up_to``: its last eval, or
    ``fit_until`` when the fit stopped before it)."""

    seed: Optional[int]
    up_to: float


@dataclass(frozen=True)
class PlannedVariant:
    """A variant's predicted reward at the budget, its interval, tier (1 = best) and whether its A is
    identified (an unidentified prediction is an extrapolation of a curve that has not bent); ``seen``: the
    runs it was fitted on, ``new_seeds``: what the mean of new seeds will show at the budget."""

    variant: str
    predicted: float
    lo: Optional[float]
    hi: Optional[float]
    tier: int
    seeds: int
    identified: bool
    setting: Dict[str, str] = field(default_factory=dict)
    seen: List[SeenRun] = field(default_factory=list)
    new_seeds: Optional[NewSeeds] = None


@dataclass(frozen=True)
class Crossover:
    """Two variants' curves cross at ``x``: ``before`` leads below it, ``after`` above it."""

    x: float
    before: str
    after: str
    reward: float


@dataclass(frozen=True)
class Crossings:
    """A variant's crossovers past ``past`` (the largest observed compute): the first where it overtakes
    another variant and the first where it is overtaken (None when there is none), and how many crossovers
    before the budget it is part of."""

    variant: str
    overtakes: Optional[Crossover]
    overtaken: Optional[Crossover]
    count: int


@dataclass(frozen=True)
class SweepPlan:
    """The plan of one sweep at ``budget``. ``best`` is the top tier (several names: a tie);
    ``scaling_keys`` the overrides that vary among its variants when they include a scaling axis, and
    ``best_setting`` their values in the top tier. ``observed_min`` and ``observed_max`` are the smallest
    and largest compute the ranked runs' fits saw (each run's last eval, or ``fit_until`` with --fit-until), ``warning`` says when the
    budget lies far beyond them or below them ("" otherwise)."""

    sweep: str
    budget: float
    x: str
    best: List[str]
    variants: List[PlannedVariant]
    crossovers: List[Crossover]
    scaling_keys: List[str]
    best_setting: List[Dict[str, str]]
    observed_min: float
    observed_max: float
    warning: str
    family: str = ""


def plan_sweeps(runs: Sequence[RunFit], sweeps: Dict[str, dict], settings: FitSettings,
                budget: float, k: int = NEW_SEEDS) -> List[SweepPlan]:
    """The plan of every sweep of ``runs`` at ``budget`` (``sweeps``: sweep.json by sweep name), each variant
    with its prediction for the mean of ``k`` new seeds."""
    by_sweep: Dict[str, List[RunFit]] = {}
    for run in runs:
        by_sweep.setdefault(run.sweep, []).append(run)
    plans = []
    for sweep, members in sorted(by_sweep.items()):
        predictions = predict_variants(members, settings, budget)
        if predictions:
            plans.append(_plan(sweep, predictions, sweeps.get(sweep) or {}, settings, budget, k))
    return plans


def _fitted_up_to(run: RunFit) -> float:
    """The compute a run's fit saw: its last eval, or ``fit_until`` when the fit stopped before it."""
    last = max(run.points_x)
    return min(run.fit_until, last) if run.fit_until is not None else last


def _plan(sweep: str, predictions: List[VariantPrediction], record: dict, settings: FitSettings,
          budget: float, k: int) -> SweepPlan:
    settings_of = variant_settings(record)
    varying = sorted({k for s in settings_of.values() for k in s if k not in RUN_LENGTH_KEYS
                      and len({str(other.get(k)) for other in settings_of.values()}) > 1})
    scaling = varying if any(k in SCALE_KEYS for k in varying) else []
    groups = predicted_tiers(predictions, settings.margin, settings.ci_level, settings.correction)
    rows = [PlannedVariant(variant=p.variant, predicted=p.value, lo=p.lo, hi=p.hi, tier=tier, seeds=len(p.runs),
                           identified=p.identified, setting={key: settings_of.get(p.variant, {}).get(key, "base")
                                                              for key in scaling},
                           seen=[SeenRun(r.seed, _fitted_up_to(r)) for r in p.runs],
                           new_seeds=new_seeds(p, variant_spread(predictions, p), k, settings.ci_level))
            for tier, group in enumerate(groups, start=1) for p in group]
    best = [row for row in rows if row.tier == 1]
    reached = [_fitted_up_to(r) for p in predictions for r in p.runs if r.points_x]
    low, high = min(reached), max(reached)
    return SweepPlan(sweep=sweep, budget=budget, x=settings.x, best=[r.variant for r in best], variants=rows,
                     crossovers=crossovers(predictions, budget), scaling_keys=scaling,
                     best_setting=[r.setting for r in best] if scaling else [], observed_min=low,
                     observed_max=high, warning=budget_warning(budget, low, high, settings.x),
                     family=tier_family(len(predictions), settings.ci_level, settings.correction).describe())


def budget_warning(budget: float, low: float, high: float, x: str) -> str:
    """One line when ``budget`` is more than EXTRAPOLATION_LIMIT x the largest observed compute ``high``, or
    below the smallest ``low`` (module docstring); "" otherwise."""
    unit = axis_label(x)
    if budget > EXTRAPOLATION_LIMIT * high:
        return (f"the budget {budget:.3g} is {budget / high:.3g}x the largest observed compute ({high:.3g} "
                f"{unit}): the predictions extrapolate far beyond the data (the paper reads its curves at 2x)")
    if budget < low:
        return (f"the budget {budget:.3g} is below the smallest observed compute ({low:.3g} {unit}): every "
                f"run has passed it, and its observed reward answers better than a prediction")
    return ""


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


def crossings(found: Sequence[Crossover], variants: Sequence[str], past: float) -> List[Crossings]:
    """Per variant of ``variants`` (in that order) with a crossover past ``past``: the first where it
    overtakes and the first where it is overtaken past ``past``, and its number of crossovers in ``found``
    (in order of compute, as ``crossovers`` returns them)."""
    out = []
    for name in variants:
        mine = [c for c in found if name in (c.before, c.after)]
        later = [c for c in mine if c.x > past]
        if later:
            out.append(Crossings(name, next((c for c in later if c.after == name), None),
                                 next((c for c in later if c.before == name), None), len(mine)))
    return out


def plan_json(plans: Sequence[SweepPlan], settings: FitSettings) -> dict:
    """plan.json's content."""
    return {"x": settings.x, "y": settings.y, "margin": settings.margin, "ci_level": settings.ci_level,
            "correction": settings.correction,
            "sweeps": [asdict(p) for p in plans]}
