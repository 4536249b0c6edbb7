"""A run's observed reward at a budget C: the mean of its EVALS evals nearest C (one eval's noise is about
as large as the differences a plan predicts, as in the extrapolation check of rlscale.fit.one_run), read at C
along their least-squares line, which is their plain mean when they sit symmetrically around C and
interpolates when they do not (a run that ends at C has its evals below it). A run whose last eval is below C
has not reached the budget: it has no observed reward there.

The value's eval variance is sigma^2 x ``factor``, factor = 1/m + (C - mean x)^2 / Sxx over the m evals
(1/m for the plain mean), sigma^2 the mean of their squared ``<y>_se`` when the run writes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from rlscale.plan.new_seeds import EVALS


@dataclass(frozen=True)
class AtBudget:
    """A run's reward at the budget (``value``), its eval-variance ``factor``, the mean squared eval SE of
    the evals behind it (``eval_variance``, None when the run writes no SE) and how many evals those are."""

    value: float
    factor: float
    eval_variance: Optional[float]
    evals: int


def at_budget(x: np.ndarray, y: np.ndarray, se: np.ndarray, budget: float, evals: int = EVALS) -> Optional[AtBudget]:
    """The reward at ``budget`` of a run's evals (x, y, se: module docstring); None when its last eval is
    below the budget."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not x.size or x.max() < budget * (1 - 1e-9):
        return None
    near = np.argsort(np.abs(x - budget), kind="stable")[:evals]
    xs, ys = x[near], y[near]
    spread = float(np.sum((xs - xs.mean()) ** 2))
    if xs.size >= 2 and spread > 0:
        slope = float(np.sum((xs - xs.mean()) * (ys - ys.mean())) / spread)
        value = float(ys.mean() + slope * (budget - xs.mean()))
        factor = 1 / xs.size + (budget - xs.mean()) ** 2 / spread
    else:
        value, factor = float(ys.mean()), 1 / xs.size
    se = np.asarray(se, dtype=float)
    ses = se[near] if se.size == x.size else np.empty(0)
    known = ses[np.isfinite(ses)]
    return AtBudget(value=value, factor=float(factor),
                    eval_variance=float(np.mean(known ** 2)) if known.size == xs.size else None, evals=int(xs.size))
