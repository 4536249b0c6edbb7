"""Bootstrap intervals for B, C_mid and predicted rewards (A's interval is its profile, rlscale.fit.profile).

The paper estimates its +-0.02 margin on A from three independent runs (App. A.7); a single run gets
intervals from its own points instead. The evals sit at compute values the run's schedule fixes (a fixed
design), and the noise is in the reward, so the bootstrap keeps the x values and redraws the noise: each
resample is the fitted curve plus a draw of the residual covariance estimated for the run
(rlscale.fit.correlated: white noise plus a slowly wandering drift), so neighbouring evals move together
as they do in a real run. Redrawing residuals one by one instead treats them as independent and gave
intervals that covered the true value in 56-80 % of runs with a drift of correlation 0.9 between evals.
The resamples are drawn and fitted BOOT_CHUNK at a time, each chunk in one vectorized call of the fast
method, warm-started at the full-data optimum, in the same search box as the point estimate (the draws are
those of one call: the generator fills rows in order), so memory stays at a chunk of curves whatever
``--n-boot``; the interval is the [(1 - level)/2, (1 + level)/2] percentiles of the refitted values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from rlscale.fit.binning import MAX_FIT_POINTS
from rlscale.fit.correlated import ResidualNoise
from rlscale.fit.fast import BatchFit, fit_batch
from rlscale.fit.forms import SigmoidParams, sigmoid
from rlscale.fit.space import SearchSpace

Interval = Tuple[float, float]


@dataclass
class BootstrapCI:
    """Percentile intervals; ``predictions`` follows the order of ``predict_at``."""

    B: Interval
    C_mid: Interval
    predictions: List[Interval]


BOOT_CHUNK = 2048  # resamples drawn and refitted at a time
MAX_N_BOOT = 100_000  # above it `rlscale fit` refuses without --force, stating the cost (bootstrap_cost)
# the cost of one resample refitted, measured 2026-12-02 on a 2-core AMD EPYC (8,192 resamples of a 31-eval
# and of a 500-eval window: 170 and 870 microseconds each, the machine shared), and the bytes it keeps (A, B,
# C_mid, sse and their concatenated copies)
SECONDS_PER_RESAMPLE = 1.2e-4
SECONDS_PER_RESAMPLE_POINT = 1.5e-6
BYTES_PER_RESAMPLE = 64


def bootstrap_cost(n_boot: int, points: Sequence[int]) -> Tuple[float, int]:
    """(CPU seconds, peak bytes) of ``n_boot`` resamples of each of runs of ``points`` fitted evals (each
    window capped at rlscale.fit.binning.MAX_FIT_POINTS), from the measured per-resample cost above."""
    seconds = n_boot * sum(SECONDS_PER_RESAMPLE + SECONDS_PER_RESAMPLE_POINT * min(n, MAX_FIT_POINTS) for n in points)
    return seconds, n_boot * BYTES_PER_RESAMPLE


def bootstrap_fits(x: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams, noise: ResidualNoise,
                   n_boot: int, rng: np.random.Generator) -> BatchFit:
    """``n_boot`` resamples of the fitted curve with noise drawn from ``noise``, each refitted (module
    docstring)."""
    fitted = sigmoid(x, r0, point.A, point.B, point.C_mid)
    root = np.linalg.cholesky(noise.covariance(x.size) + 1e-15 * np.eye(x.size))
    parts = []
    for done in range(0, n_boot, BOOT_CHUNK):
        curves = fitted + rng.standard_normal((min(BOOT_CHUNK, n_boot - done), x.size)) @ root.T
        parts.append(fit_batch(x, curves, r0, space, np.ones(curves.shape), start=(point.C_mid, point.B)))
    return BatchFit(*(np.concatenate([getattr(p, name) for p in parts]) for name in ("A", "B", "C_mid", "sse")))


def bootstrap_ci(x: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams, noise: ResidualNoise,
                 predict_at: Sequence[float], n_boot: int, level: float,
                 rng: np.random.Generator) -> BootstrapCI:
    """Resample the fitted curve ``n_boot`` times and refit each resample."""
    fit = bootstrap_fits(x, r0, space, point, noise, n_boot, rng)
    q = [50 * (1 - level), 50 * (1 + level)]

    def interval(values: np.ndarray) -> Interval:
        lo, hi = np.percentile(values, q)
        return float(lo), float(hi)

    return BootstrapCI(B=interval(fit.B), C_mid=interval(fit.C_mid),
                       predictions=[interval(sigmoid(c, r0, fit.A, fit.B, fit.C_mid)) for c in predict_at])
