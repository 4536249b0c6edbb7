"""Evaluate fitted curves for plotting (numpy only; the fitting itself lives in ``rlscale.fit``).

ScaleRL (arXiv 2510.13786) Eq. 1: R_C = R0 + (A - R0) / (1 + (C_mid / C)^B).
Figure 7 / App. A.7: F(R_C) = C_mid^B / ((A - R0) / (R_C - R0) - 1), which equals C^B on the curve, so
log F against log C is a line of slope B through the origin.
"""
from __future__ import annotations

import numpy as np


def sigmoid(c: np.ndarray, A: float, B: float, C_mid: float, R0: float) -> np.ndarray:
    """Eq. 1 at compute ``c`` (``c`` = 0 gives R0)."""
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return R0 + (A - R0) / (1.0 + (C_mid / c) ** B)


def power_law(c: np.ndarray, A: float, D: float, B: float) -> np.ndarray:
    """App. A.4's alternative R_C = A - D / C^B (the sigmoid's high-compute tail)."""
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return A - D / c ** B


def log_linearize(c: np.ndarray, r: np.ndarray, A: float, B: float, C_mid: float, R0: float):
    """Figure-7 coordinates (C, log10 F(R_C)) of the points where F is defined and finite: R0 < R_C < A
    and C > 0. Computed in logs, log10 F = B log10 C_mid - log10((A - R0)/(R_C - R0) - 1), so a large
    compute unit (FLOPs: C^B ~ 1e45) never overflows."""
    c = np.asarray(c, dtype=float)
    r = np.asarray(r, dtype=float)
    keep = (c > 0) & (r > R0) & (r < A)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_f = B * np.log10(C_mid) - np.log10((A - R0) / (r[keep] - R0) - 1.0)
    finite = np.isfinite(log_f)
    return c[keep][finite], log_f[finite]


def compute_grid(lo: float, hi: float, logx: bool, n: int = 160) -> np.ndarray:
    """Plotting abscissae from ``lo`` to ``hi`` (geometric on log axes, where ``lo`` must be > 0)."""
    if logx:
        return np.geomspace(max(lo, hi * 1e-4), hi, n)
    return np.linspace(lo, hi, n)
