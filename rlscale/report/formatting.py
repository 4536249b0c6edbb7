"""Number formatting shared by the HTML page and the terminal summary."""
from __future__ import annotations

import math
from typing import Optional

FORMATS = ("png", "pdf", "svg")  # figure files of --figures

DASH = "\u2014"


def num(value: Optional[float], digits: int = 3) -> str:
    """Fixed decimals (rewards, A, B); ``digits=0`` formats compute: whole numbers with thousands
    separators, scientific notation beyond a million (FLOPs) or below one; None is a dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if digits == 0:
        return f"{value:,.0f}" if 1 <= abs(value) < 1e6 or value == 0 else f"{value:.3g}"
    return f"{value + 0.0:.{digits}f}" if round(value, digits) else f"{0:.{digits}f}"


def ci(lo: Optional[float], hi: Optional[float], digits: int = 3) -> str:
    """A confidence interval as "[lo, hi]", empty when either end is missing."""
    if lo is None or hi is None:
        return ""
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def signed_ci(value: Optional[float], lo: Optional[float], hi: Optional[float], digits: int = 3) -> str:
    """A difference with its interval, "+0.012 [-0.004, +0.028]"; a dash when there is no difference."""
    if value is None:
        return DASH
    text = f"{value:+.{digits}f}"
    return text if lo is None or hi is None else f"{text} [{lo:+.{digits}f}, {hi:+.{digits}f}]"
