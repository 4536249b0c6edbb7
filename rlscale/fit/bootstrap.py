"""Residual bootstrap intervals for A, B, C_mid and predicted rewards.

The paper estimates its +-0.02 margin on A from three independent runs (App. A.7); a single run gets a
bootstrap interval instead. The evals sit at compute values the run's schedule fixes (a fixed design), and
the noise is in the reward, so the bootstrap keeps the x values and resamples the residuals of the fit: each
resample is the fitted curve plus n residuals drawn with replacement (centred, and scaled by
sqrt(n / (n - 3)) for the three fitted parameters A, B and C_mid). All resamples are fitted in one
vectorized call of the fast method, warm-started at the full-data optimum, in the same search box as the
point estimate; the interval is the [(1 - level)/2, (1 + level)/2] percentiles of the refitted values.
Resampling the points themselves instead (a pairs bootstrap) drops the few evals of a plateau from many
resamples, so on a run of ten evals it cannot bound A even where the curve has flattened.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from rlscale.fit.fast import BatchFit, fit_batch
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


N_FITTED = 3  # A, B and C_mid; R0 is the first eval's reward


def resample_curves(x: np.ndarray, y: np.ndarray, r0: float, point: SigmoidParams, n_boot: int,
                    rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` residual resamples of the curve (module docstring), shape (n_boot, n)."""
    fitted = sigmoid(x, r0, point.A, point.B, point.C_mid)
    residuals = y - fitted
    residuals = (residuals - residuals.mean()) * np.sqrt(x.size / max(x.size - N_FITTED, 1))
    return fitted + residuals[rng.integers(0, x.size, size=(n_boot, x.size))]


def refit_resamples(x: np.ndarray, curves: np.ndarray, r0: float, space: SearchSpace,
                    start: SigmoidParams) -> BatchFit:
    """Fit every resampled curve (rows of ``curves``), warm-started at ``start``."""
    return fit_batch(x, curves, r0, space, np.ones(curves.shape), start=(start.C_mid, start.B))


def bootstrap_ci(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams,
                 predict_at: Sequence[float], n_boot: int, level: float,
                 rng: np.random.Generator) -> BootstrapCI:
    """Resample the fitted curve ``n_boot`` times and refit each resample."""
    fit = refit_resamples(x, resample_curves(x, y, r0, point, n_boot, rng), r0, space, point)
    q = [50 * (1 - level), 50 * (1 + level)]

    def interval(values: np.ndarray) -> Interval:
        lo, hi = np.percentile(values, q)
        return float(lo), float(hi)

    return BootstrapCI(A=interval(fit.A), B=interval(fit.B), C_mid=interval(fit.C_mid),
                       predictions=[interval(sigmoid(c, r0, fit.A, fit.B, fit.C_mid)) for c in predict_at])
