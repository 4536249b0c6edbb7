"""Percentile bootstrap intervals for A, B, C_mid and predicted rewards.

The paper estimates its +-0.02 margin on A from three independent runs (App. A.7); a single run gets a
nonparametric interval instead: the fitted points are resampled with replacement (as multinomial weights on
the same points, so all resamples are fitted in one vectorized call of the fast method, warm-started at
the full-data optimum, in the same search box as the point estimate), and the interval is the
[(1 - level)/2, (1 + level)/2] percentiles of the refitted values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from rlscale.fit.fast import fit_batch
from rlscale.fit.forms import SigmoidParams, sigmoid
from rlscale.fit.space import SearchSpace

Interval = Tuple[float, float]


@dataclass
class BootstrapCI:
    """Percentile intervals; ``predictions`` follows the order of ``predict_at``."""

    A: Interval
    B: Interval
    C_mid: Interval
    predictions: List[Interval]


def resample_weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` resamples of n points with replacement, as multinomial counts (n_boot, n)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)


def bootstrap_ci(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams,
                 predict_at: Sequence[float], n_boot: int, level: float,
                 rng: np.random.Generator) -> BootstrapCI:
    """Resample the n fitted points ``n_boot`` times and refit each resample."""
    fit = fit_batch(x, y, r0, space, resample_weights(x.size, n_boot, rng), start=(point.C_mid, point.B))
    q = [50 * (1 - level), 50 * (1 + level)]

    def interval(values: np.ndarray) -> Interval:
        lo, hi = np.percentile(values, q)
        return float(lo), float(hi)

    return BootstrapCI(A=interval(fit.A), B=interval(fit.B), C_mid=interval(fit.C_mid),
                       predictions=[interval(sigmoid(c, r0, fit.A, fit.B, fit.C_mid)) for c in predict_at])
