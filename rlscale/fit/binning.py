"""Long windows fitted on the means of consecutive evals, so a fit's memory and time stay bounded.

A run's residual covariance (rlscale.fit.correlated) and its bootstrap draws (rlscale.fit.bootstrap) are
n x n in the n fitted evals: 21,000 evals (a 200 MB metrics file) would need 3.5 GB for one matrix. A window
of more than MAX_FIT_POINTS evals is therefore fitted on MAX_FIT_POINTS groups of consecutive evals (equal
counts, the first groups one longer), each at the mean of its compute and of its rewards. Eq. 1 barely
bends within a group of a few dozen evals at the rates of a real run, and the group mean keeps what the
evals say about the curve: the white noise shrinks by the group size, while a drift and the eval set's
offset, shared by neighbouring evals, stay as they are.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

MAX_FIT_POINTS = 500


def binned(x: np.ndarray, y: np.ndarray, max_points: int = MAX_FIT_POINTS) -> Tuple[np.ndarray, np.ndarray]:
    """(x, y) as they are up to ``max_points`` points; beyond, the means of ``max_points`` groups of
    consecutive points (module docstring)."""
    if x.size <= max_points:
        return x, y
    sizes = np.full(max_points, x.size // max_points)
    sizes[: x.size % max_points] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(x, starts) / sizes, np.add.reduceat(y, starts) / sizes
