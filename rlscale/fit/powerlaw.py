"""The alternative form of App. A.4, R = A - D / C^B, fitted on the same window as the sigmoid.

The paper fits it to show why the sigmoid is the default: on (1.5k, 50k) GPU-hours the power law put A at
1.0 (truth ~0.65), on (5k, 50k) at 0.74, while the sigmoid gave 0.645 on every window. For fixed B the form
is linear in (A, D), so (A, D) are solved in closed form (A clipped to ``a_bounds``, as the sigmoid's) and
B is found by a log-spaced scan, refined by scans of REFINE_POINTS values between the best value's neighbours
(each round narrows the bracket 16-fold; after REFINE_ROUNDS, log B is known to 1e-9). The fit is made on C
over its largest value; in the run's own units D = d * C_max^B, so B stays below MAX_LOG / ln C_max, where D and
C^B are finite floats (on training FLOPs, C_max ~ 1e16, B = 20 would put D near 1e320).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from rlscale.fit.results import PowerLawFit

B_RANGE = (1e-3, 20.0)
MAX_LOG = 600.0  # ln of the largest D and C^B kept (a float64 ends near e^709)
B_SCAN = 64
REFINE_POINTS = 33
REFINE_ROUNDS = 8  # the scan, then 7 refinements: 0.31 / 16^7 in log B


def fit_power_law(x: np.ndarray, y: np.ndarray, a_bounds: Sequence[float]) -> PowerLawFit:
    """Least-squares R = A - D / C^B on points with x > 0; B in [1e-3, 20], and below MAX_LOG / ln C_max."""
    scale = float(np.max(x))
    xs = x / scale
    b_hi = min(B_RANGE[1], MAX_LOG / math.log(scale)) if scale > 1 else B_RANGE[1]
    log_b = np.linspace(math.log(B_RANGE[0]), math.log(b_hi), B_SCAN)
    for _ in range(REFINE_ROUNDS):
        i = int(np.argmin(_profile_sse(xs, y, np.exp(log_b), a_bounds)[2]))
        best = float(log_b[i])
        log_b = np.linspace(log_b[max(i - 1, 0)], log_b[min(i + 1, log_b.size - 1)], REFINE_POINTS)
    b = math.exp(best)
    a, d, fitted_sse = (float(v[0]) for v in _profile_sse(xs, y, np.array([b]), a_bounds))
    return PowerLawFit(A=a, D=d * scale ** b, B=b, sse=fitted_sse)


def _profile_sse(xs: np.ndarray, y: np.ndarray, b: np.ndarray, a_bounds: Sequence[float]):
    """For each B: the least-squares (A, D) in scaled units and the SSE. R = A + D * p with p = -xs^-B."""
    p = -(xs[None, :] ** -b[:, None])
    pm, ym = p.mean(axis=1), y.mean()
    pc = p - pm[:, None]
    var = np.einsum("ij,ij->i", pc, pc)
    d = np.divide(pc @ (y - ym), var, out=np.zeros_like(var), where=var > 0)
    a = ym - d * pm
    clipped = (a < a_bounds[0]) | (a > a_bounds[1])
    a = np.clip(a, *a_bounds)
    pp = np.einsum("ij,ij->i", p, p)
    d = np.where(clipped, np.divide(p @ y - a * p.sum(axis=1), pp, out=np.zeros_like(pp), where=pp > 0), d)
    r = y[None, :] - a[:, None] - d[:, None] * p
    return a, d, np.einsum("ij,ij->i", r, r)
