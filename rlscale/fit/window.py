"""Which points of a run are fitted: the compute window [cutoff, fit_until] (App. A.6).

The paper starts its fits after ~1.5k GPU-hours (about one epoch) so that the early, near-linear phase is
excluded. That absolute cutoff only makes sense for paper-scale runs, so the rule is:

- ``x == gpu_hours`` and the run reaches at least 4 x 1.5k = 6k GPU-hours: cutoff = 1.5k GPU-hours;
- otherwise (short runs, other units): cutoff = 10% of the run's compute (1.5k is ~10% of the paper's 16k
  GPU-hour LOO runs);
- ``--min-compute C`` (absolute) or ``--min-compute P%`` (a fraction of the run) overrides both.

"The run's compute" is the largest x available to the fit, i.e. at most ``fit_until``, so a fit until C
sees exactly what a run stopped at C would have. The step-0 eval gives R0 and is never fitted (x > 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from rlscale.fit.schema import FitSettings

PAPER_CUTOFF = 1500.0
PAPER_MIN_LENGTH = 4 * PAPER_CUTOFF
SHORT_RUN_FRACTION = 0.10


@dataclass(frozen=True)
class Window:
    """The fitted compute range of one run. ``length`` is the largest x available to the fit;
    ``paper_scale`` says the run is long enough, in GPU-hours, for the paper's absolute numbers."""

    cutoff: float
    rule: str
    fit_until: Optional[float]
    length: float
    paper_scale: bool

    def mask(self, x: np.ndarray) -> np.ndarray:
        inside = (x > 0) & (x >= self.cutoff)
        return inside if self.fit_until is None else inside & (x <= self.fit_until)


def fit_window(x: np.ndarray, settings: FitSettings) -> Window:
    """The window of a run whose eval points lie at compute ``x`` (finite, sorted)."""
    fit_until = settings.fit_until
    if fit_until is None and settings.fit_until_frac is not None and x.size:
        fit_until = settings.fit_until_frac * float(x.max())
    available = x if fit_until is None else x[x <= fit_until]
    length = float(available.max()) if available.size else 0.0
    paper_scale = settings.x == "gpu_hours" and length >= PAPER_MIN_LENGTH
    if settings.min_compute is not None:
        cutoff, rule = settings.min_compute, "--min-compute"
    elif settings.min_compute_frac is not None:
        cutoff, rule = settings.min_compute_frac * length, f"--min-compute {settings.min_compute_frac:.0%} of run"
    elif paper_scale:
        cutoff, rule = PAPER_CUTOFF, "paper 1.5k GPU-h"
    else:
        cutoff, rule = SHORT_RUN_FRACTION * length, f"short run: {SHORT_RUN_FRACTION:.0%} of run"
    return Window(cutoff=float(cutoff), rule=rule, fit_until=fit_until, length=length, paper_scale=paper_scale)


def describe_rule(settings: FitSettings) -> str:
    """The cutoff rule in force, for FitSettings.cutoff_rule."""
    if settings.min_compute is not None:
        return f"--min-compute {settings.min_compute:g} {settings.x}"
    if settings.min_compute_frac is not None:
        return f"--min-compute {settings.min_compute_frac:.0%} of each run's {settings.x}"
    return (f"paper: {PAPER_CUTOFF:g} GPU-hours when x is gpu_hours and the run reaches {PAPER_MIN_LENGTH:g}; "
            f"otherwise {SHORT_RUN_FRACTION:.0%} of the run's {settings.x}")
