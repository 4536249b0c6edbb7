"""The two curve forms of the paper: the sigmoid of Eq. 1 and the power law of App. A.4.

Eq. 1:     R_C = R0 + (A - R0) / (1 + (C_mid / C)^B)      (0 <= A <= 1, B > 0; R0 given, not fitted)
App. A.4:  R_C = A - D / C^B                              (the sigmoid's high-compute tail)

The sigmoid is written as R0 + (A - R0) * expit(B * (log C - log C_mid)), which equals Eq. 1 and neither
overflows for large B nor divides by zero at C = 0 (where it gives R0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

N_PARAMS = 3  # Eq. 1's fitted parameters: A, B, C_mid (R0 is given)


@dataclass(frozen=True)
class SigmoidParams:
    """A fitted Eq. 1 curve and its sum of squared residuals on the fitted points."""

    A: float
    B: float
    C_mid: float
    sse: float


def sigmoid(x, r0: float, a, b, c_mid) -> np.ndarray:
    """Eq. 1 at compute ``x``; ``a``, ``b``, ``c_mid`` broadcast against ``x`` (e.g. bootstrap arrays)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        z = np.asarray(b) * (np.log(x) - np.log(c_mid))
    return r0 + (np.asarray(a) - r0) * expit(z)


def power_law(x, a: float, d: float, b: float) -> np.ndarray:
    """App. A.4: R = A - D / C^B (defined for C > 0)."""
    return a - d * np.asarray(x, dtype=float) ** (-b)
