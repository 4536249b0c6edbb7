"""The interval of A from the profile of the sum of squares (App. A.7's A, with its uncertainty).

For a value a of A, SSE(a) is the least sum of squares of Eq. 1 with A held at a and B, C_mid free (the
fast search of rlscale.fit.fast at that A). The interval is every a with

    SSE(a) - SSE_min <= inflation * s^2 * F(level; 1, n - 3),     s^2 = SSE_min / (n - 3),

the likelihood-ratio interval of nonlinear least squares, with the residual variance widened by the
correlation of the residuals (rlscale.fit.correlated). Unlike a bootstrap from the fitted curve, it does not
inherit that curve's shape: a run stopped at 79 % of its rise whose fit happens to bend early (A drawn low)
still has a flat profile above A, since later bends fit its points as well, so its interval reaches up
rather than settling around the low draw (on such runs the residual bootstrap covered A in 65-88 % of the
runs it called identified). Each end is found by bracketing and bisection on [a_lo, A] and [A, a_hi]; an
end that reaches the box (SSE at the box edge still within the bound) is the edge itself, and A is then
not bounded on that side (rlscale.fit.one_run: not identified). SSE(a) at the values the root finder asks for is
continued outward from the point estimate's optimum (rlscale.fit.fast.FixedAProfile), not searched afresh:
the same values as :func:`profile_sse` to 1e-6 or better, at a small part of its cost (bench/fit_bench.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Tuple

import numpy as np
from scipy.optimize import brentq
from scipy.stats import f as f_dist

from rlscale.fit.fast import FixedAProfile, fit_fast
from rlscale.fit.forms import SigmoidParams
from rlscale.fit.space import SearchSpace

TOLERANCE = 2e-4


def profile_sse(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, a: float) -> float:
    """The least SSE with A held at ``a``."""
    return fit_fast(x, y, r0, space.with_fixed_a(a)).sse


def sse_bound(point: SigmoidParams, n: int, inflation: float, level: float) -> float:
    """The largest SSE inside the interval (module docstring)."""
    dof = max(n - 3, 1)
    return point.sse + inflation * point.sse / dof * float(f_dist.ppf(level, 1, dof))


def profile_interval_a(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams,
                       inflation: float, level: float) -> Tuple[float, float]:
    """(lo, hi) of A (module docstring). SSE(a) is :func:`profile_sse`'s, continued from the optimum at the
    nearest A already evaluated between the point estimate and a (rlscale.fit.fast.FixedAProfile: outward from
    the point, never back from an A farther out, whose optimum may sit in another basin), each A evaluated
    once."""
    bound = sse_bound(point, x.size, inflation, level)
    profile = FixedAProfile(x, y, r0, space)
    values: Dict[float, float] = {}

    def end(edge: float) -> float:
        optima = [(point.A, profile.start_of(point))]  # the A values of this side so far and their optima

        def excess(a: float) -> float:
            if a not in values:
                inward = [known for known in optima if (known[0] - a) * (known[0] - point.A) <= 0]
                start = min(inward, key=lambda known: abs(known[0] - a))[1]
                values[a], optimum = profile.sse(a, start)
                optima.append((a, optimum))
            return values[a] - bound

        at_point = excess(point.A) + bound
        if abs(edge - point.A) < TOLERANCE or excess(edge) <= 0:
            return edge
        if at_point >= bound:  # a noise-free curve: no width beyond the search's own precision
            return point.A
        return float(brentq(excess, point.A, edge, xtol=TOLERANCE))

    return end(space.a_lo), end(space.a_hi)


def bend_excluded_from(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, point: SigmoidParams,
                       inflation: float, level: float, c: float) -> bool:
    """Whether every Eq. 1 curve whose C_mid is at ``c`` or later fits worse than A's interval allows (the SSE
    bound of :func:`profile_interval_a`): the data place the bend before ``c``. The least SSE with C_mid held
    in [c, c_hi] is the fast search of that part of the box (rlscale.fit.fast.fit_fast)."""
    if c >= space.c_hi:
        return True
    later = fit_fast(x, y, r0, replace(space, c_lo=max(space.c_lo, c)))
    return later.sse > sse_bound(point, x.size, inflation, level)
