"""The fast fit of Eq. 1: a continuous search of the same box as App. A.5, vectorized over many curves.

For fixed (C_mid, B) Eq. 1 is linear in A: R - R0 = (A - R0) s(C), s = expit(B (log C - log C_mid)), so
A is profiled out in closed form (least squares, clipped to its bounds; the SSE is a parabola in A, so
clipping gives the constrained optimum). What remains is a 2-D problem in (u, v) = (log C_mid, log B):

1. a coarse grid (32 C_mid x 16 B, log-spaced) is scored for every curve with two matrix products;
2. Levenberg-Marquardt (variable projection: the exact Jacobian of the profiled residual) runs from the
   best few local minima of the grid, with bounds by projection, accepting only steps that lower the SSE.

Curves that share x (bootstrap resamples as multinomial weights on the same points) share the grid's
basis, so a whole bootstrap is one call. The result is never worse than the best grid cell; since the box
contains the paper's grid and the starts cover every basin the grid sees, it is at least as good as App. A.5
on the same points (checked in tests and bench/fit_bench.py). All x must be > 0.

A's profile (rlscale.fit.profile) holds A at a few dozen values in turn: :class:`FixedAProfile` scores the
grid once for the run and continues each value from a neighbouring value's optimum by Newton's method,
with the same guarantee against the grid.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Tuple

import numpy as np
from scipy.special import expit

from rlscale.fit.forms import SigmoidParams
from rlscale.fit.space import SearchSpace

GRID_C_MID = 32
GRID_B = 16
N_STARTS = 3
MAX_ITER = 100
MAX_STEP = 1.0
GRID_SLACK = 1e-12  # relative SSE by which a grid cell must beat a continued optimum to overrule it
NEWTON_TOL = 1e-10  # step in (log C_mid, log B) at which the fixed-A Newton run has converged


@dataclass
class BatchFit:
    """Per-curve results of :func:`fit_batch` (arrays of length m)."""

    A: np.ndarray
    B: np.ndarray
    C_mid: np.ndarray
    sse: np.ndarray


def fit_fast(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace,
             start: Optional[Tuple[float, float]] = None) -> SigmoidParams:
    """The min-SSE Eq. 1 curve in ``space`` for one run's points (``start``: see :func:`fit_batch`). With A held
    (``space.with_fixed_a``) and a ``start``, Newton's method (:func:`_newton_fixed_a`) runs from it, and
    Levenberg-Marquardt only when that does not converge."""
    if start is not None and space.a_lo == space.a_hi:
        scale = float(np.max(x))
        bounds = _bounds(space, scale, r0)
        found = _newton_fixed_a(np.log(x / scale), np.asarray(y, dtype=float) - r0, space.a_lo - r0,
                                *_start_uv(start, scale, bounds), bounds)
        if found is not None:
            return SigmoidParams(A=space.a_lo, B=math.exp(found[2]), C_mid=scale * math.exp(found[1]), sse=found[0])
    fit = fit_batch(x, y, r0, space, np.ones((1, x.size)), start)
    return SigmoidParams(A=float(fit.A[0]), B=float(fit.B[0]), C_mid=float(fit.C_mid[0]), sse=float(fit.sse[0]))


def fit_batch(x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace, weights: np.ndarray,
              start: Optional[Tuple[float, float]] = None) -> BatchFit:
    """Fit m weighted curves on the same x: ``y`` is one curve (n,) shared by all, or one per row (m, n)
    (bootstrap resamples); ``weights`` (m, n) multiplies each point's squared residual.
    Levenberg-Marquardt starts from the grid's best local minima, or only from ``start`` = (C_mid, B)
    when given (a bootstrap or a fixed-A refit warm-started at the full-data optimum)."""
    scale = float(np.max(x))
    lx = np.log(x / scale)
    d = np.broadcast_to(np.asarray(y, dtype=float) - r0, weights.shape)
    bounds = _bounds(space, scale, r0)
    m = weights.shape[0]
    if start is None:
        u0, v0 = _grid_starts(_Grid.of(lx, d, weights, bounds), bounds)
    else:
        u0, v0 = (np.full(m, c) for c in _start_uv(start, scale, bounds))
    u, v, g, sse = _refine(lx, d, weights, u0, v0, bounds)
    return BatchFit(A=r0 + g, B=np.exp(v), C_mid=scale * np.exp(u), sse=sse)


def _refine(lx: np.ndarray, d: np.ndarray, w: np.ndarray, u0: np.ndarray, v0: np.ndarray, bounds: _Bounds):
    """Step 2 for m curves (rows of ``d`` and ``w``) from starts (u0, v0) of length k m (start-major): the
    best (u, v, g, sse) of each curve's starts."""
    m = w.shape[0]
    rows = np.tile(np.arange(m), u0.size // m)
    u, v, g, sse = _levenberg_marquardt(lx, d[rows], w[rows], u0, v0, bounds)
    pick = np.argmin(sse.reshape(-1, m), axis=0) * m + np.arange(m)  # best start of each curve
    return u[pick], v[pick], g[pick], sse[pick]


class FixedAProfile:
    """The least SSE of one curve with A held at a given value, for many values of A (the profile of A,
    rlscale.fit.profile): the minimum over (C_mid, B) of Eq. 1 at fixed A, as :func:`fit_fast` finds it in
    ``space.with_fixed_a(a)``, continued from a nearby A's optimum instead of searched afresh.

    :meth:`sse` runs Newton's method on the exact Hessian of the SSE in (u, v) = (log C_mid, log B), damped
    and projected onto the box like step 2, from ``start`` (the optimum at a neighbouring A: the profile moves
    A in small steps, so it starts in that optimum's basin and converges in a few steps), or from the best cell
    of the coarse grid of step 1 when that cell fits better than ``start`` (an A far from it). The grid is
    scored once for the curve (its products do not depend on A); a cell of it below the continued
    optimum at this A (by more than GRID_SLACK), or a Newton run that does not converge, sends the value back
    to fit_fast's search, step 2 from the grid's best local minima, so the result is never worse than the
    best grid cell, as fit_fast's."""

    def __init__(self, x: np.ndarray, y: np.ndarray, r0: float, space: SearchSpace):
        self._r0 = r0
        self._scale = float(np.max(x))
        self._lx = np.log(x / self._scale)
        self._d = np.asarray(y, dtype=float) - r0
        self._bounds = _bounds(space, self._scale, r0)
        self._grid = _Grid.of(self._lx, self._d[None, :], np.ones((1, x.size)), self._bounds)

    def start_of(self, params: SigmoidParams) -> Tuple[float, float]:
        """A fit's (C_mid, B) as a start (u, v) of :meth:`sse`."""
        return math.log(params.C_mid / self._scale), math.log(params.B)

    def sse(self, a: float, start: Tuple[float, float]) -> Tuple[float, Tuple[float, float]]:
        """(least SSE with A held at ``a``, the optimum (u, v) to start the next A from)."""
        g = a - self._r0
        cells = self._grid.sse(g, g)[0]
        best = int(np.argmin(cells))
        if cells[best] < float(np.sum((self._d - g * expit(math.exp(start[1]) * (self._lx - start[0]))) ** 2)):
            start = float(self._grid.uu[best]), float(self._grid.vv[best])  # a far A: the grid is closer
        found = _newton_fixed_a(self._lx, self._d, g, *start, self._bounds)
        if found is not None and found[0] <= float(cells[best]) * (1 + GRID_SLACK):
            return found[0], (found[1], found[2])
        bounds = replace(self._bounds, g_lo=g, g_hi=g)
        u, v, _, sse = _refine(self._lx, self._d[None, :], np.ones((1, self._d.size)),
                               *_grid_starts(self._grid, bounds), bounds)
        return float(sse[0]), (float(u[0]), float(v[0]))


def _newton_fixed_a(lx: np.ndarray, d: np.ndarray, g: float, u: float, v: float,
                    bounds: _Bounds) -> Optional[Tuple[float, float, float]]:
    """Damped, projected Newton on SSE(u, v) = |d - g s|^2 with A - R0 = g held; (sse, u, v) at convergence
    (a step below NEWTON_TOL, or one that would lower the SSE by less than its rounding, or a plateau flat to
    rounding across the box), None when it does not converge in MAX_ITER steps. A coordinate at its bound whose
    descent direction points outward is held, as in :func:`_step`."""
    lam = 0.0
    here = _sse_derivatives(lx, d, g, u, v)
    for _ in range(MAX_ITER):
        f, gu, gv, huu, huv, hvv = here
        if abs(gu) * (bounds.u_hi - bounds.u_lo) + abs(gv) * (bounds.v_hi - bounds.v_lo) <= 1e-13 * f:
            return f, u, v  # flat to rounding across the whole box: a plateau of a saturated curve
        hold_u = (u <= bounds.u_lo and gu > 0) or (u >= bounds.u_hi and gu < 0)
        hold_v = (v <= bounds.v_lo and gv > 0) or (v >= bounds.v_hi and gv < 0)
        a11, a22 = huu + lam * max(abs(huu), 1e-300), hvv + lam * max(abs(hvv), 1e-300)
        det = a11 * a22 - huv * huv
        if hold_u and hold_v:
            return f, u, v
        if hold_u:
            du, dv = 0.0, (-gv / a22 if a22 > 0 else math.nan)
        elif hold_v:
            du, dv = (-gu / a11 if a11 > 0 else math.nan), 0.0
        elif det > 0 and a11 > 0:
            du, dv = -(a22 * gu - huv * gv) / det, -(a11 * gv - huv * gu) / det
        else:
            du = dv = math.nan
        if not (math.isfinite(du) and math.isfinite(dv)):
            lam = max(10 * lam, 1e-6)
            if lam > 1e10:
                return None
            continue
        if lam == 0.0 and -(gu * du + gv * dv) <= 1e-16 * f:
            return f, u, v  # the full Newton step would lower the SSE by less than its rounding
        norm = max(math.hypot(du, dv) / MAX_STEP, 1.0)
        nu = min(max(u + du / norm, bounds.u_lo), bounds.u_hi)
        nv = min(max(v + dv / norm, bounds.v_lo), bounds.v_hi)
        if abs(nu - u) + abs(nv - v) < NEWTON_TOL:
            return f, u, v
        there = _sse_derivatives(lx, d, g, nu, nv)
        if there[0] <= f:
            u, v, here, lam = nu, nv, there, lam / 10 if lam > 1e-6 else 0.0
        else:
            lam = max(10 * lam, 1e-6)
            if lam > 1e10:
                return None
    return None


def _sse_derivatives(lx: np.ndarray, d: np.ndarray, g: float, u: float, v: float):
    """SSE(u, v) = |d - g s|^2, s = expit(e^v (lx - u)), with its gradient and Hessian in (u, v):
    (f, f_u, f_v, f_uu, f_uv, f_vv)."""
    b = math.exp(v)
    z = b * (lx - u)
    s = expit(z)
    q = s * (1 - s)
    t = q * (1 - 2 * s)  # d q / d z
    r = d - g * s
    su, sv = -b * q, z * q
    suu, suv, svv = b * b * t, -b * (q + z * t), sv + z * z * t
    return (float(r @ r), -2 * g * float(r @ su), -2 * g * float(r @ sv),
            2 * g * (g * float(su @ su) - float(r @ suu)), 2 * g * (g * float(su @ sv) - float(r @ suv)),
            2 * g * (g * float(sv @ sv) - float(r @ svv)))


@dataclass(frozen=True)
class _Bounds:
    u_lo: float
    u_hi: float
    v_lo: float
    v_hi: float
    g_lo: float
    g_hi: float


def _start_uv(start: Tuple[float, float], scale: float, bounds: _Bounds) -> Tuple[float, float]:
    """A start (C_mid, B) as (u, v), inside the box."""
    return (float(np.clip(np.log(start[0] / scale), bounds.u_lo, bounds.u_hi)),
            float(np.clip(np.log(start[1]), bounds.v_lo, bounds.v_hi)))


def _bounds(space: SearchSpace, scale: float, r0: float) -> _Bounds:
    """``space`` in the search's coordinates: u = log(C_mid / scale), v = log B, g = A - R0."""
    return _Bounds(u_lo=np.log(space.c_lo / scale), u_hi=np.log(space.c_hi / scale), v_lo=np.log(space.b_lo),
                   v_hi=np.log(space.b_hi), g_lo=space.a_lo - r0, g_hi=space.a_hi - r0)


def _profile(s: np.ndarray, d: np.ndarray, w: np.ndarray, bounds: _Bounds):
    """Closed-form A - R0 for each row of basis ``s`` and curve ``d`` (rows); returns (g, residuals, sse,
    g_is_interior)."""
    sw = w * s
    den = _rowdot(sw, s)
    raw = _rowdot(sw, d) / np.where(den > 0, den, np.inf)
    g = np.minimum(np.maximum(raw, bounds.g_lo), bounds.g_hi)
    r = d - g[:, None] * s
    return g, r, _rowdot(w * r, r), (raw > bounds.g_lo) & (raw < bounds.g_hi)


@dataclass(frozen=True)
class _Grid:
    """The coarse grid of step 1 for m weighted curves: its cells (u, v), and per curve and cell the two
    products of the closed-form A (num = <w d, s>, den = <w, s^2>) and <w, d^2>; they do not depend on A's
    bounds, so one grid serves every fixed A of a profile."""

    uu: np.ndarray
    vv: np.ndarray
    num: np.ndarray
    den: np.ndarray
    dd: np.ndarray

    @classmethod
    def of(cls, lx: np.ndarray, d: np.ndarray, w: np.ndarray, bounds: _Bounds) -> "_Grid":
        us = np.linspace(bounds.u_lo, bounds.u_hi, GRID_C_MID)
        vs = np.linspace(bounds.v_lo, bounds.v_hi, GRID_B)
        uu, vv = (a.ravel() for a in np.meshgrid(us, vs, indexing="ij"))
        s = expit(np.exp(vv)[:, None] * (lx[None, :] - uu[:, None]))
        return cls(uu=uu, vv=vv, num=(w * d) @ s.T, den=w @ (s * s).T, dd=_rowdot(w, d * d))

    def sse(self, g_lo, g_hi) -> np.ndarray:
        """The profiled SSE of every curve (rows) at every cell (columns), A - R0 clipped to [g_lo, g_hi]."""
        num, den = self.num, self.den
        g = np.minimum(np.maximum(num / np.where(den > 0, den, np.inf), g_lo), g_hi)
        return self.dd[:, None] - 2 * g * num + g * g * den


def _grid_starts(grid: _Grid, bounds: _Bounds) -> Tuple[np.ndarray, np.ndarray]:
    """The N_STARTS lowest local minima of the profiled SSE on the coarse grid, per curve, as (u, v)
    arrays of length N_STARTS * m (start-major)."""
    grid_sse = grid.sse(bounds.g_lo, bounds.g_hi).reshape(-1, GRID_C_MID, GRID_B)
    padded = np.pad(grid_sse, ((0, 0), (1, 1), (1, 1)), constant_values=np.inf)
    is_min = np.ones_like(grid_sse, dtype=bool)
    for du in (-1, 0, 1):
        for dv in (-1, 0, 1):
            if du or dv:
                is_min &= grid_sse <= padded[:, 1 + du:1 + du + GRID_C_MID, 1 + dv:1 + dv + GRID_B]
    ranked = np.where(is_min, grid_sse, np.inf).reshape(grid_sse.shape[0], -1)
    best = np.argsort(ranked, axis=1, kind="stable")[:, :N_STARTS]
    # rows with fewer local minima than N_STARTS repeat their best one
    found = np.isfinite(np.take_along_axis(ranked, best, axis=1))
    best = np.where(found, best, best[:, :1])
    cells = best.T.ravel()
    return grid.uu[cells], grid.vv[cells]


def _levenberg_marquardt(lx, d, w, u, v, bounds: _Bounds):
    """Projected Levenberg-Marquardt on the profiled SSE, one independent problem per row."""
    u, v = u.copy(), v.copy()
    lam = np.full(u.size, 1e-3)
    s, z, g, r, sse, free = _evaluate(lx, d, w, u, v, bounds)
    active = np.arange(u.size)
    for _ in range(MAX_ITER):
        if active.size == 0:
            break
        a = slice(None) if active.size == u.size else active
        da, wa, ua, va, sse_a = d[a], w[a], u[a], v[a], sse[a]
        du, dv = _step(s[a], z[a], g[a], r[a], free[a], wa, lam[a], ua, va, bounds)
        nu = np.minimum(np.maximum(ua + du, bounds.u_lo), bounds.u_hi)
        nv = np.minimum(np.maximum(va + dv, bounds.v_lo), bounds.v_hi)
        ns, nz, ng, nr, nsse, nfree = _evaluate(lx, da, wa, nu, nv, bounds)
        ok = nsse < sse_a
        lam[a] = np.where(ok, np.maximum(lam[a] / 3, 1e-12), lam[a] * 4)
        done = (lam[a] > 1e10) | (np.abs(nu - ua) + np.abs(nv - va) < 1e-9) | (ok & (sse_a - nsse <= 1e-12 * nsse))
        acc = active[ok]  # after the tests above: with a = slice(None), ua and sse_a are views
        u[acc], v[acc], s[acc], z[acc], g[acc], r[acc], sse[acc], free[acc] = (
            nu[ok], nv[ok], ns[ok], nz[ok], ng[ok], nr[ok], nsse[ok], nfree[ok])
        active = active[~done]
    return u, v, g, sse


def _evaluate(lx, d, w, u, v, bounds: _Bounds):
    z = np.exp(v)[:, None] * (lx[None, :] - u[:, None])
    s = expit(z)
    g, r, sse, free = _profile(s, d, w, bounds)
    return s, z, g, r, sse, free


def _step(s, z, g, r, free, w, lam, u, v, bounds: _Bounds):
    """The damped Gauss-Newton step in (u, v). Jacobian of the profiled residual r = d - g(theta) s(theta):
    dr = -g ds - s dg with dg = (<ds, r> - g <s, ds>) / <s, s> where A is interior, dg = 0 where clipped;
    ds/du = -B s (1 - s), ds/dv = z s (1 - s). A coordinate at its bound whose step points outward is frozen."""
    q = s * (1 - s)
    ws, wr = w * s, w * r
    ss = _rowdot(ws, s)
    ss = np.where(ss > 0, ss, 1.0)
    ju, jv = (-(g[:, None] * ds + (free * (_rowdot(ds, wr) - g * _rowdot(ws, ds)) / ss)[:, None] * s)
              for ds in (-np.exp(v)[:, None] * q, z * q))
    wu, wv = w * ju, w * jv
    h11, h12, h22, g1, g2 = _rowdot(wu, ju), _rowdot(wu, jv), _rowdot(wv, jv), _rowdot(wu, r), _rowdot(wv, r)
    a11, a22 = h11 * (1 + lam) + 1e-300, h22 * (1 + lam) + 1e-300
    det = a11 * a22 - h12 * h12
    det = np.where(det > 0, det, np.inf)
    du, dv = -(a22 * g1 - h12 * g2) / det, -(a11 * g2 - h12 * g1) / det
    fu = ((u <= bounds.u_lo) & (du < 0)) | ((u >= bounds.u_hi) & (du > 0))
    fv = ((v <= bounds.v_lo) & (dv < 0)) | ((v >= bounds.v_hi) & (dv > 0))
    du, dv = (np.where(fu, 0.0, np.where(fv, -g1 / a11, du)), np.where(fv, 0.0, np.where(fu, -g2 / a22, dv)))
    norm = np.maximum(np.hypot(du, dv) / MAX_STEP, 1.0)
    return du / norm, dv / norm


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of two (m, n) arrays."""
    return np.vecdot(a, b) if hasattr(np, "vecdot") else np.einsum("ij,ij->i", a, b)
