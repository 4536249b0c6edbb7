"""Predicted reward at a compute budget, per variant, with its interval: the paper's extrapolation (fit on
part of the budget, read Eq. 1 at the whole of it: LOO runs fitted to 8k and read at 16k GPU-hours,
Section 5 fits at half the target budget, App. A.4), used to stop hopeless variants of a sweep early
(rlscale.sweep.prune) and to plan a budget (rlscale.plan).

A variant's prediction is the mean over its seeds of Eq. 1 at ``at`` (each seed fitted alone,
rlscale.fit.one_run). The difference between two variants' predictions has an interval from the same two
sources as every other difference (rlscale.fit.differences): the seed t-interval when both have >= 2
seeds, else the bootstrap of both runs' points (resamples of the fitted points, refitted, Eq. 1 read at
``at``). The seed spread of a prediction grows with the extrapolation (a curve that has not bent yet
spreads far more than one past its bend), so the spread is pooled over the variants whose A is
identified (all of them when none is), and a pair's seed interval uses the larger of that pooled spread
(with its degrees of freedom) and each of the two variants' own spread.

**Separated** (``separated``): the difference is a ceiling-type finding at the budget
(rlscale.fit.verdicts.ceiling_resolved): more than the margin, with an interval that excludes 0 (a
bootstrap interval, blind to the run-to-run spread, must lie wholly beyond the margin), at the level the
tiers' family leaves to one comparison (Bonferroni over the n - 1 cuts, rlscale.fit.family). Variants that
are not separated from the best are **tied** with it; tiers follow the transitive rule of rlscale.fit.ranking.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy.stats import t as student_t

from rlscale.fit.differences import Pooled, Samples, difference, mean_draws
from rlscale.fit.family import HOLM, Family, family
from rlscale.fit.forms import sigmoid
from rlscale.fit.ranking import tiers
from rlscale.fit.one_run import bootstrap_refits
from rlscale.fit.results import Difference, FitSettings, RunFit
from rlscale.fit.verdicts import ceiling_resolved


@dataclass(frozen=True)
class VariantPrediction:
    """One variant's predicted reward at ``at``: the seed mean ``value``, its interval [lo, hi] (seed
    t-interval with the pooled seed spread, else bootstrap percentiles, else none) and the per-seed
    values and bootstrap draws behind it. ``identified`` is False when some seed's A is not identified
    (the prediction is then an extrapolation of a curve that has not bent)."""

    sweep: str
    variant: str
    at: float
    samples: Samples
    lo: Optional[float]
    hi: Optional[float]
    identified: bool
    runs: Tuple[RunFit, ...]

    @property
    def value(self) -> float:
        return self.samples.mean

    def curve(self, x) -> np.ndarray:
        """The seed-mean predicted reward at compute ``x`` (array)."""
        return np.mean([sigmoid(x, r.R0, r.A, r.B, r.C_mid) for r in self.runs], axis=0)


def prediction_draws(run: RunFit, settings: FitSettings, at: float) -> Optional[np.ndarray]:
    """Eq. 1 at ``at`` for each bootstrap refit of an ok run (the resamples behind its own intervals: same
    seed, same points, same residual covariance). Shape (settings.n_boot,); None for a run without intervals."""
    fit = bootstrap_refits(run, settings)
    return None if fit is None else sigmoid(at, run.R0, fit.A, fit.B, fit.C_mid)


def predict_variants(runs: Sequence[RunFit], settings: FitSettings, at: float) -> List[VariantPrediction]:
    """The prediction at ``at`` of every variant with at least one fitted run (grouped by sweep and
    variant; bootstrap draws only for variants of one seed, the only ones whose differences use them)."""
    groups: Dict[Tuple[str, str], List[RunFit]] = defaultdict(list)
    for run in runs:
        if run.fitted:
            groups[(run.sweep, run.variant)].append(run)
    bare = []
    for (sweep, variant), group in sorted(groups.items()):
        values = [float(sigmoid(at, r.R0, r.A, r.B, r.C_mid)) for r in group]
        draws = None
        if len(values) < 2 and settings.n_boot > 0:
            draws = mean_draws([prediction_draws(r, settings, at) for r in group])
        bare.append(VariantPrediction(sweep=sweep, variant=variant, at=at, samples=Samples(values, draws), lo=None,
                                      hi=None, identified=all(r.A_identified is not False for r in group),
                                      runs=tuple(group)))
    pooled = pooled_of(bare)
    return [replace(p, **dict(zip(("lo", "hi"), _interval(p.samples, _spread(pooled, p.samples.seeds),
                                                           settings.ci_level)))) for p in bare]


def _interval(samples: Samples, pooled: Optional[Pooled], level: float) -> Tuple[Optional[float], Optional[float]]:
    """A variant's own interval: seed t-interval, else bootstrap percentiles, else none."""
    if len(samples.seeds) >= 2 and pooled is not None:
        half = student_t.ppf((1 + level) / 2, pooled.df) * pooled.sd / math.sqrt(len(samples.seeds))
        return samples.mean - half, samples.mean + half
    if samples.draws is not None and samples.draws.size:
        lo, hi = np.percentile(samples.draws, [50 * (1 - level), 50 * (1 + level)])
        return float(lo), float(hi)
    return None, None


def gap(better: VariantPrediction, worse: VariantPrediction, pooled: Optional[Pooled], level: float) -> Difference:
    """better - worse at the budget, with its interval (module docstring)."""
    return difference(better.samples, worse.samples, _spread(pooled, better.samples.seeds, worse.samples.seeds),
                      level)


def _spread(pooled: Optional[Pooled], *groups: Sequence[float]) -> Optional[Pooled]:
    """The pooled seed spread, raised to the largest own spread of ``groups`` (module docstring)."""
    if pooled is None:
        return None
    own = [statistics.stdev(g) for g in groups if len(g) >= 2]
    return Pooled(sd=max([pooled.sd, *own]), df=pooled.df)


def pooled_of(predictions: Sequence[VariantPrediction]) -> Optional[Pooled]:
    """The seed spread of the predictions, pooled over the identified variants with >= 2 seeds (module
    docstring)."""
    return Pooled.of([p.samples.seeds for p in predictions if p.identified]
                   or [p.samples.seeds for p in predictions])


def separated(d: Difference, margin: float, level: Optional[float] = None) -> bool:
    """``d`` (higher minus lower) resolves a difference at the budget (module docstring), its interval read at
    ``level`` when given (the level a family of comparisons leaves to one, rlscale.fit.family)."""
    return d.value > 0 and ceiling_resolved(d, margin, level)


def tier_family(n: int, level: float, correction: str) -> Family:
    """The comparisons the tiers of ``n`` predictions make: each below the first of its tier once, n - 1,
    Bonferroni (the reference is chosen by earlier cuts, rlscale.fit.family)."""
    return family("each setting against the first of its tier at the budget", max(n - 1, 0), level, correction,
                  fixed=False)


def predicted_tiers(predictions: Sequence[VariantPrediction], margin: float, level: float,
                    correction: str = HOLM) -> List[List[VariantPrediction]]:
    """Tiers by predicted reward (rlscale.fit.ranking.tiers): a variant starts a new tier when it is
    separated from the first member of the current one at the level ``tier_family`` leaves to one comparison."""
    pooled = pooled_of(predictions)
    per_test = 1 - tier_family(len(predictions), level, correction).per_test
    return tiers(predictions, value=lambda p: p.value, name=lambda p: p.variant,
                 separated=lambda first, item: separated(gap(first, item, pooled, level), margin, per_test))


def variant_spread(predictions: Sequence[VariantPrediction], prediction: VariantPrediction) -> Optional[Pooled]:
    """The seed spread behind ``prediction``'s own interval: the spread pooled over ``predictions`` raised to
    the variant's own (module docstring); None when there is none to pool."""
    return _spread(pooled_of(predictions), prediction.samples.seeds)
