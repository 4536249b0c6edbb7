"""The parameter box searched by both fitting methods (App. A.5).

The paper searches A over {0.450, 0.455, ..., 0.800} and C_mid over 100 linear values in [100, 40000]
GPU-hours, with B free (> 0). Its C_mid grid was set for runs of ~16k GPU-hours (the LOO runs), i.e. it
spans [L/160, 2.5 L] for a run of length L. Rescaling rule (continuous in L, rlscale.fit.window.c_mid_scale):
GPU-hour runs of 6k or more use the paper's grid as is, shorter ones the grid times L / 6k; runs in other
units use the grid times L / 16k, so it spans [L/160, 2.5 L] of that run. ``--c-mid-grid`` sets an absolute
grid instead.

The fast method searches the continuous box A in ``a_bounds`` (default [0, 1], Eq. 1's constraint; it
contains the paper's A grid), C_mid in the same range as the paper's grid and B in [0.02, 50].
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rlscale.fit.results import FitSettings
from rlscale.fit.window import Window

PAPER_C_MID_GRID = (100.0, 40000.0, 100)
B_BOUNDS = (0.02, 50.0)


@dataclass(frozen=True)
class SearchSpace:
    """A in [a_lo, a_hi] (paper grid step ``a_step``), C_mid in [c_lo, c_hi] (paper grid of ``c_n``
    linear values), B in [b_lo, b_hi] (fast method only; the paper leaves B to curve_fit)."""

    a_lo: float
    a_hi: float
    a_step: float
    c_lo: float
    c_hi: float
    c_n: int
    b_lo: float = B_BOUNDS[0]
    b_hi: float = B_BOUNDS[1]

    def a_values(self) -> np.ndarray:
        if self.a_hi <= self.a_lo or self.a_step <= 0:
            return np.array([self.a_lo])
        return np.round(np.arange(self.a_lo, self.a_hi + self.a_step / 2, self.a_step), 10)

    def c_values(self) -> np.ndarray:
        return np.linspace(self.c_lo, self.c_hi, self.c_n)

    def with_fixed_a(self, a: float) -> "SearchSpace":
        """The box with A held at ``a`` (the paper's fixed-A refits, Section 4)."""
        return replace(self, a_lo=a, a_hi=a, a_step=0.0)


def search_space(settings: FitSettings, window: Window) -> SearchSpace:
    """The box for one run: A from the method (paper: the A grid; fast: ``a_bounds``), C_mid from the
    paper's grid rescaled to the run (module docstring)."""
    if settings.c_mid_grid is not None:
        c_lo, c_hi, c_n = settings.c_mid_grid
    else:
        scale = window.c_scale
        c_lo, c_hi, c_n = PAPER_C_MID_GRID[0] * scale, PAPER_C_MID_GRID[1] * scale, PAPER_C_MID_GRID[2]
    if settings.method == "paper":
        a_lo, a_hi, a_step = settings.a_grid
    else:
        (a_lo, a_hi), a_step = settings.a_bounds, settings.a_grid[2]
    return SearchSpace(a_lo=float(a_lo), a_hi=float(a_hi), a_step=float(a_step), c_lo=float(c_lo),
                       c_hi=float(c_hi), c_n=int(c_n))
