"""App. A.5's fitting procedure, reproduced as written.

For every A on the A grid and every C_mid on the C_mid grid, B is fitted with ``scipy.optimize.curve_fit``
(default initialisation, B0 = 1, no bounds); the cell with the lowest sum of squared residuals wins. Cells
where curve_fit does not converge or returns B <= 0 (Eq. 1 requires B > 0) are skipped. About
71 x 100 curve_fit calls per run: slow, kept as the reference that the fast method is checked against.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from rlscale.fit.forms import SigmoidParams
from rlscale.fit.space import SearchSpace


def fit_paper(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace) -> SigmoidParams:
    """The min-SSE cell of the (A, C_mid) grid with B by curve_fit; raises RuntimeError if no cell fits."""
    best = SigmoidParams(A=math.nan, B=math.nan, C_mid=math.nan, sse=math.inf)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", OptimizeWarning)
        for a in space.a_values():
            for c_mid in space.c_values():
                curve = _eq1_in_b(r0, a, c_mid)
                try:
                    (b,), _ = curve_fit(curve, x, y)
                except (RuntimeError, ValueError):
                    continue
                if not b > 0:
                    continue
                sse = float(np.sum((y - curve(x, b)) ** 2))
                if sse < best.sse:
                    best = SigmoidParams(A=float(a), B=float(b), C_mid=float(c_mid), sse=sse)
    if not math.isfinite(best.sse):
        raise RuntimeError("curve_fit converged in no cell of the A x C_mid grid")
    return best


def _eq1_in_b(r0: float, a: float, c_mid: float):
    """Eq. 1 as a function of (C, B) only: curve_fit counts the parameters from the signature."""
    def curve(c, b):
        return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)
    return curve
