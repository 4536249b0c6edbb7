"""Intervals of the difference between two variants in A, or in B refit at a fixed A (App. A.7, Section 4).

Two sources, named in every row (``Difference.source``):

- ``seeds n=k`` when both variants have >= 2 seeds: a t-interval on the difference of the seed means,
  d +- t(level, df) * s * sqrt(1/n_p + 1/n_q), with the seed standard deviation s pooled over every variant
  of the sweep that has >= 2 seeds (df = sum of n_i - 1). Pooling assumes one seed spread per sweep, as the
  paper's single margin does, and gives the interval the degrees of freedom three seeds alone lack (df 4
  per pair vs ~20 for a 10-variant sweep of 3 seeds).
- ``bootstrap`` otherwise: each run's fitted points are resampled (the resamples behind its own A_lo, A_hi),
  refitted, the draws of a variant's seeds averaged, and the percentile interval of p - q taken. It sees the
  eval noise of the points but not the run-to-run spread, which is why a one-seed ceiling verdict needs its
  whole interval beyond the margin and a one-seed efficiency verdict is never given (rlscale.fit.verdicts).

With ``--n-boot 0`` and fewer than 2 seeds there is no interval (``none``).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
from scipy.stats import t as student_t

from rlscale.fit.results import Difference

BOOTSTRAP = "bootstrap"
NONE = "none"


@dataclass(frozen=True)
class Samples:
    """One variant's estimates of a quantity: one value per seed, and the bootstrap draws of its seed mean
    (None without a bootstrap)."""

    seeds: List[float]
    draws: Optional[np.ndarray]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.seeds)


@dataclass(frozen=True)
class Pooled:
    """The seed standard deviation pooled over the variants of a sweep with >= 2 seeds, and its df."""

    sd: float
    df: int

    @classmethod
    def of(cls, groups: Sequence[Sequence[float]]) -> Optional["Pooled"]:
        multi = [g for g in groups if len(g) >= 2 and all(math.isfinite(v) for v in g)]
        df = sum(len(g) - 1 for g in multi)
        if df == 0:
            return None
        return cls(sd=math.sqrt(sum(statistics.variance(g) * (len(g) - 1) for g in multi) / df), df=df)


def difference(p: Samples, q: Samples, pooled: Optional[Pooled], level: float) -> Difference:
    """p - q with its interval (module docstring for the source)."""
    value = p.mean - q.mean
    if len(p.seeds) >= 2 and len(q.seeds) >= 2 and pooled is not None:
        se = pooled.sd * math.sqrt(1 / len(p.seeds) + 1 / len(q.seeds))
        half = student_t.ppf((1 + level) / 2, pooled.df) * se
        n = len(p.seeds) if len(p.seeds) == len(q.seeds) else f"{len(p.seeds)}/{len(q.seeds)}"
        return Difference(value, value - half, value + half, f"seeds n={n}", se=se, df=pooled.df)
    if p.draws is None or q.draws is None or not p.draws.size:
        return Difference(value, None, None, NONE)
    draws = p.draws - q.draws
    lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return Difference(value, float(lo), float(hi), BOOTSTRAP, draws=tuple(float(d) for d in draws))


def mean_draws(draws: List[np.ndarray]) -> Optional[np.ndarray]:
    """The bootstrap draws of a seed mean: the element-wise mean of each seed's draws."""
    return np.mean(draws, axis=0) if draws and all(d is not None for d in draws) else None
