"""What Figure 7 of ScaleRL (arXiv 2510.13786, Section 4 and App. A.7) shows for a LOO sweep, before any
drawing: every curve refit at the sweep's average A, and each variant's eval points as
(C, F(R_C)) with F(R_C) = C_mid^B / ((A - R0)/(R_C - R0) - 1), which is C^B on the curve, so the points of
a variant follow a line of slope B on log-log axes.

F is a power B of compute, so its size depends on the unit: C^B is ~1e7 in the paper's GPU-hours but ~1e45
in FLOPs. Past a million units, compute is counted in a power of ten of the unit (``scale``) on both axes,
which is the same plot with the same slopes. F is computed only where it is defined and finite (R0 < R_C <
A); points near A or R0, where F runs off to infinity or zero, would stretch the axis over dozens of
decades, so the F axis spans the points' robust range (ROBUST_QUANTILES) and the drawn lines, and says how
many points fall outside.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from rlscale.fit.results import ComparisonRow, axis_label
from rlscale.report.curves import log_linearize
from rlscale.report.content import SweepView

ROBUST_QUANTILES = (0.05, 0.95)
PAD = 0.08  # of the span of log10 F, each side
MIN_DECADES = 1.0  # the narrowest F axis
SCALE_FROM = 1e6  # compute beyond this is counted in a power of ten of its unit
Y_LABEL = "F(R_C) = C_mid^B / ((A - R0)/(R_C - R0) - 1)"


@dataclass(frozen=True)
class Cloud:
    """One variant's points in Figure-7 coordinates (compute in the plot's scale, log10 F) and its slope
    ``B`` at the fixed A; ``anchor`` is its first run's (the colour of the variant)."""

    variant: str
    B: float
    anchor: str
    c: np.ndarray
    log_f: np.ndarray

    def line(self, n: int = 50) -> Tuple[np.ndarray, np.ndarray]:
        """The line of slope B through the cloud's median point, over its compute: (C, log10 F)."""
        grid = np.geomspace(self.c.min(), self.c.max(), n)
        c0, f0 = np.median(np.log10(self.c)), np.median(self.log_f)
        return grid, f0 + self.B * (np.log10(grid) - c0)


@dataclass(frozen=True)
class Figure7:
    """The plot of a LOO sweep: its clouds at ``A_fixed``, compute counted in units of ``scale`` (1: the
    fit's own unit), the F axis ``ylim`` (log10) and how many points lie outside it."""

    A_fixed: float
    clouds: List[Cloud]
    scale: float
    x: str
    ylim: Tuple[float, float]
    hidden: int

    @property
    def x_label(self) -> str:
        unit = axis_label(self.x)
        return unit if self.scale == 1 else f"{unit}, in units of 1e{round(math.log10(self.scale))}"


def figure7(sweep: SweepView, x: str) -> Optional[Figure7]:
    """Figure 7 of a sweep's LOO rows (None when no row has a fixed-A fit with points where F is defined)."""
    rows = [row for row in sweep.loo if row.A_fixed is not None and row.B_fixed is not None]
    scale = compute_scale([c for run in sweep.runs for c in run.eval.x])
    clouds = [cloud for row in rows if (cloud := _cloud(sweep, row, scale)) is not None]
    if not clouds:
        return None
    ylim = robust_limits(clouds)
    hidden = sum(int(np.sum((c.log_f < ylim[0]) | (c.log_f > ylim[1]))) for c in clouds)
    return Figure7(rows[0].A_fixed, clouds, scale, x, ylim, hidden)


def figure7_missing(sweep: SweepView) -> str:
    """Why a LOO sweep has no Figure 7, in words ("" when it has one)."""
    if not sweep.loo:
        return "the sweep has no leave-one-out table"
    if not any(row.A_fixed is not None for row in sweep.loo):
        return "no run's A is identified, so there is no common A to refit B at"
    if not any(row.A_fixed is not None and row.B_fixed is not None for row in sweep.loo):
        return "no variant has a B refit at the fixed A"
    if figure7(sweep, "step") is None:
        return ("no eval lies strictly between R0 and the fixed A, where F(R_C) is defined, or no variant has a "
                "C_mid")
    return ""


def compute_scale(xs: List[float]) -> float:
    """1 while the largest compute is below SCALE_FROM, else the power of ten at or below it."""
    top = max(xs, default=0.0)
    return 1.0 if top < SCALE_FROM else 10.0 ** math.floor(math.log10(top))


def robust_limits(clouds: List[Cloud]) -> Tuple[float, float]:
    """The log10 F axis: the points' ROBUST_QUANTILES and the drawn lines, padded by PAD, at least
    MIN_DECADES wide."""
    points = np.concatenate([c.log_f for c in clouds])
    lines = np.concatenate([c.line()[1] for c in clouds])
    lo = min(float(np.quantile(points, ROBUST_QUANTILES[0])), float(lines.min()))
    hi = max(float(np.quantile(points, ROBUST_QUANTILES[1])), float(lines.max()))
    pad = max(PAD * (hi - lo), (MIN_DECADES - (hi - lo)) / 2)
    return lo - pad, hi + pad


def _cloud(sweep: SweepView, row: ComparisonRow, scale: float) -> Optional[Cloud]:
    """A LOO row's points: its runs' evals at (A_fixed, B_fixed) with the row's C_mid (else a seed's; the
    C_mid only moves a cloud up or down, the line is drawn through its median)."""
    runs = [r for r in sweep.runs if r.variant == row.variant and r.fit is not None and r.fit.R0 is not None]
    c_mid = row.C_mid if row.C_mid is not None else next((r.fit.C_mid for r in runs if r.fit.C_mid), None)
    if c_mid is None:
        return None
    pairs = [log_linearize(r.eval.x / scale, r.eval.y, row.A_fixed, row.B_fixed, c_mid / scale, r.fit.R0)
             for r in runs]
    c = np.concatenate([p[0] for p in pairs]) if pairs else np.empty(0)
    if not len(c):
        return None
    return Cloud(row.variant, row.B_fixed, runs[0].anchor, c, np.concatenate([p[1] for p in pairs]))
