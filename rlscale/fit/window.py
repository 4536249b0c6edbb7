"""Which points of a run are fitted: the compute window [cutoff, fit_until] (App. A.6).

The paper starts its fits after ~1.5k GPU-hours (about one epoch, ~10 % of its 16k GPU-hour LOO runs) so
that the early, near-linear phase is excluded. The default cutoff is one continuous rule of the run's
compute L (the largest x available to the fit):

    cutoff = min(1.5k, 10 % of L)  when x is gpu_hours (the paper's 1.5k for runs of 15k GPU-hours or more),
    cutoff = 10 % of L             in any other unit (core-hours, FLOPs, samples, ...).

``--min-compute C`` (absolute, in x) or ``--min-compute P%`` overrides it; ``--fit-until C`` or ``P%`` ends
the window.

Deterministic axis. Fractions of a run (the default cutoff, ``P%``) are placed on a counted axis ``t``
(flops when every eval line of the run carries it, else the step), never on measured time: the cutoff
is the fraction f = cutoff / L of the run, and a point is fitted when its t >= f x (largest t). Two runs
with the same evals give the same fitted points however their measured times moved under load (for runs
of 15k GPU-hours or more f = 1.5k / L follows the run's total, not any one eval's time). Only an absolute
``--min-compute C`` / ``--fit-until C`` is read on x itself, as asked.

The C_mid search range follows the same continuous rule (rlscale.fit.space): the paper's [100, 40000]
GPU-hours for runs of 6k GPU-hours or more, shrunk in proportion below; in other units [L/160, 2.5 L].
The step-0 eval gives R0 and is never fitted (x > 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from rlscale.fit.results import FitSettings

PAPER_CUTOFF = 1500.0
RUN_FRACTION = 0.10
PAPER_GRID_LENGTH = 6000.0
PAPER_RUN_LENGTH = 16000.0
_TOL = 1e-9


@dataclass(frozen=True)
class Window:
    """The fitted range of one run. ``cutoff``/``fit_until`` are in x (for the tables); the points are
    chosen by ``lo``/``hi`` on x (``*_on_x``) or on the deterministic axis t. ``length`` is the largest x
    available to the fit; ``c_scale`` multiplies the paper's C_mid grid (rlscale.fit.space)."""

    cutoff: float
    rule: str
    fit_until: Optional[float]
    length: float
    c_scale: float
    lo: float
    lo_on_x: bool
    hi: Optional[float]
    hi_on_x: bool

    def mask(self, x: np.ndarray, t: Optional[np.ndarray] = None) -> np.ndarray:
        """Points inside the window (``t`` defaults to ``x``)."""
        t = x if t is None else t
        low = x if self.lo_on_x else t
        inside = (x > 0) & (low >= self.lo - _TOL * abs(self.lo))
        return inside & ~self.beyond(x, t)

    def beyond(self, x: np.ndarray, t: Optional[np.ndarray] = None) -> np.ndarray:
        """Points past ``fit_until`` (where extrapolation is checked)."""
        if self.hi is None:
            return np.zeros(x.shape, dtype=bool)
        return _past(x if self.hi_on_x or t is None else t, self.hi)


def fit_window(x: np.ndarray, settings: FitSettings, t: Optional[np.ndarray] = None) -> Window:
    """The window of a run whose eval points lie at compute ``x`` and deterministic position ``t``
    (default: x itself), both finite and sorted."""
    t = x if t is None else np.asarray(t, dtype=float)
    hi, hi_on_x = None, True
    if settings.fit_until is not None:
        hi = settings.fit_until
    elif settings.fit_until_frac is not None and x.size:
        hi, hi_on_x = settings.fit_until_frac * float(t.max()), t is x
    available = np.ones(x.shape, dtype=bool) if hi is None else ~_past(x if hi_on_x else t, hi)
    length = float(x[available].max()) if available.any() else 0.0
    t_length = float(t[available].max()) if available.any() else 0.0
    fit_until = settings.fit_until if settings.fit_until is not None else (length if hi is not None else None)
    if settings.min_compute is not None:
        cutoff, rule = settings.min_compute, "--min-compute"
        lo, lo_on_x = cutoff, True
    else:
        if settings.min_compute_frac is not None:
            fraction, rule = settings.min_compute_frac, f"--min-compute {settings.min_compute_frac:.0%} of run"
            cutoff = fraction * length
        else:
            cutoff = default_cutoff(length, settings.x)
            fraction = cutoff / length if length > 0 else 0.0
            rule = "paper 1.5k GPU-h" if cutoff == PAPER_CUTOFF else f"{RUN_FRACTION:.0%} of run"
        lo, lo_on_x = (cutoff, True) if t is x else (fraction * t_length, False)
    return Window(cutoff=float(cutoff), rule=rule, fit_until=fit_until, length=length,
                  c_scale=c_mid_scale(length, settings.x), lo=float(lo), lo_on_x=lo_on_x, hi=hi, hi_on_x=hi_on_x)


def default_cutoff(length: float, x_unit: str) -> float:
    """The default cutoff of a run of compute ``length``: continuous in ``length`` (module docstring)."""
    if x_unit == "gpu_hours":
        return min(PAPER_CUTOFF, RUN_FRACTION * length)
    return RUN_FRACTION * length


def c_mid_scale(length: float, x_unit: str) -> float:
    """The factor on the paper's C_mid grid: 1 for GPU-hour runs of 6k or more, length / 6k below (so
    the grid shrinks continuously), length / 16k in other units ([L/160, 2.5 L])."""
    if x_unit == "gpu_hours":
        return min(1.0, length / PAPER_GRID_LENGTH)
    return length / PAPER_RUN_LENGTH


def describe_rule(settings: FitSettings) -> str:
    """The cutoff rule in force, for FitSettings.cutoff_rule."""
    if settings.min_compute is not None:
        return f"--min-compute {settings.min_compute:g} {settings.x}"
    if settings.min_compute_frac is not None:
        return f"--min-compute {settings.min_compute_frac:.0%} of each run (on flops, else step)"
    if settings.x == "gpu_hours":
        return (f"min({PAPER_CUTOFF:g} GPU-hours, {RUN_FRACTION:.0%} of the run), the fraction placed on flops "
                f"(else step)")
    return f"{RUN_FRACTION:.0%} of the run, placed on flops (else step)"


def _past(values: np.ndarray, hi: float) -> np.ndarray:
    return values > hi + _TOL * abs(hi)
