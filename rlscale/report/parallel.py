"""Parallel curves: the report's view of several eval metrics of the same runs (``rlscale fit --y a,b``,
rlscale.fit.by_metric), the in-distribution reward beside a mixture's parts or the downstream sets.

Per sweep and run, each metric's eval points and its own Eq. 1 fit (A with its interval, B, C_mid), and how
well each further metric tracks the first over the run's evals: Pearson's r of the two metrics' values at
the evals both hold, with its 95 % interval (Fisher's z; wide when a run has few evals) so a weak or strong
tracking is only called so when the interval says it. The views are joined to the report's runs by
rlscale.report.parallel_join.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
from scipy.stats import norm

from rlscale.fit.results import RunFit

MIN_POINTS = 4  # evals both metrics hold, for a correlation with an interval
Z95 = float(norm.ppf(0.975))  # the two-sided 95 % normal quantile


@dataclass(frozen=True)
class Tracking:
    """Pearson's r of a further metric against the first over a run's evals, its 95 % interval and n."""

    r: float
    lo: float
    hi: float
    n: int


@dataclass
class ParallelRun:
    """One run (its name and page anchor): its fit of each metric (None where that metric has no fit of the
    run) and, per further metric, how it tracks the first."""

    name: str
    anchor: str
    fits: Dict[str, Optional[RunFit]]
    tracking: Dict[str, Optional[Tracking]] = field(default_factory=dict)


@dataclass
class ParallelSweep:
    """A sweep's runs under every fitted metric, the first the report's own."""

    metrics: List[str]
    runs: List[ParallelRun]


def correlation(x: np.ndarray, y: np.ndarray) -> Optional[Tracking]:
    """Pearson's r with a Fisher-z 95 % interval; None below ``MIN_POINTS`` points or with a constant series."""
    n = len(x)
    if n < MIN_POINTS or np.std(x) == 0 or np.std(y) == 0:
        return None
    r = float(np.clip(np.corrcoef(x, y)[0, 1], -0.999999, 0.999999))
    half = Z95 / math.sqrt(n - 3)
    return Tracking(r, math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half), n)


def paired(first: RunFit, other: RunFit) -> Optional[Tracking]:
    """The two metrics' values at the evals (same compute) both fits hold."""
    theirs = dict(zip(other.points_x, other.points_y))
    pairs = [(y, theirs[x]) for x, y in zip(first.points_x, first.points_y) if x in theirs]
    if not pairs:
        return None
    a, b = np.array(pairs, dtype=float).T
    return correlation(a, b)
