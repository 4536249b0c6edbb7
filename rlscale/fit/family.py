"""Family-wise error control over the comparisons of one table (App. A.7's margin applied to many variants).

A leave-one-out table compares nine reversions with the base, a ranking cuts ten variants into tiers, a plan
or a pruning rung compares every setting with the best: each comparison at 95 % alone lets a table of k null
comparisons print at least one false finding with probability up to 1 - 0.95^k (about a third of LOO tables
of nine null axes). So every table that calls a difference resolved controls the probability of any false
finding in it (the family-wise error rate) at 1 - ``ci_level``:

- **Holm** (step-down; Holm 1979) where the family is fixed before any test is read: the LOO table (each
  reverted axis against the base, a ceiling test and an efficiency test per axis: ``2 x axes`` comparisons)
  and a pruning rung (each variant against the best). The p-values are sorted; the j-th smallest is
  compared with alpha / (m - j + 1) and the first that fails stops the procedure. It rejects whatever
  Bonferroni rejects, and more.
- **Bonferroni** (alpha / m for each) where the comparisons are made as the table is built: a ranking's
  and a plan's tiers compare each variant with the first of its tier, a reference that earlier decisions
  chose, so the order Holm needs is not known in advance; m is the number of comparisons the tiering makes
  (one per variant below the first: ``variants - 1``, and as many for B inside the A tiers of a ranking).

``--no-correction`` (``FitSettings.correction`` "none") judges each comparison alone at 1 - ``ci_level``.
Every table states its family (what it compares), m and the level left to each comparison.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
from scipy.stats import t as student_t

from rlscale.fit.results import Difference

HOLM, BONFERRONI, NO_CORRECTION = "holm", "bonferroni", "none"
CORRECTIONS = (HOLM, NO_CORRECTION)


@dataclass(frozen=True)
class Family:
    """The comparisons of one table: what they compare (``name``), how many (``size``), the family-wise
    level ``alpha`` and the correction (``method``: holm, bonferroni or none)."""

    name: str
    size: int
    alpha: float
    method: str

    @property
    def per_test(self) -> float:
        """The level left to one comparison under Bonferroni (and the smallest Holm uses); alpha without a
        correction."""
        return self.alpha if self.method == NO_CORRECTION else self.alpha / max(self.size, 1)

    def describe(self) -> str:
        """One line for the table's caption."""
        if self.method == NO_CORRECTION:
            return (f"{self.size} comparisons ({self.name}), each at {self.alpha:.0%} alone "
                    "(--no-correction: the chance of some false finding grows with their number)")
        return (f"{rule_name(self.method)} over {self.size} comparisons ({self.name}): any false finding in the table at most "
                f"{self.alpha:.0%}, each comparison at {self.per_test:.2g} or less")


def rule_name(method: str) -> str:
    """A correction's name as the tables print it: Holm, Bonferroni (a method without one as it is)."""
    return {HOLM: "Holm", BONFERRONI: "Bonferroni"}.get(method, method)


def family(name: str, size: int, ci_level: float, correction: str, fixed: bool) -> Family:
    """The family of a table of ``size`` comparisons: Holm when the comparisons are ``fixed`` in advance,
    else Bonferroni (module docstring); no correction for ``correction`` "none"."""
    method = NO_CORRECTION if correction == NO_CORRECTION else (HOLM if fixed else BONFERRONI)
    return Family(name=name, size=size, alpha=1 - ci_level, method=method)


def holm_adjusted(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's adjusted p-values (None stays None and does not count): the j-th smallest of m is
    max over i <= j of min(1, (m - i + 1) p_(i))."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    out: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def adjusted(p_values: Sequence[Optional[float]], fam: Family) -> List[Optional[float]]:
    """The p-values of ``fam``'s comparisons adjusted by its method."""
    if fam.method == HOLM:
        return holm_adjusted(p_values)
    if fam.method == BONFERRONI:
        return [None if p is None else min(1.0, p * fam.size) for p in p_values]
    return list(p_values)


def p_beyond(d: Difference, bound: float) -> Optional[float]:
    """The two-sided p-value of ``d`` against |true difference| <= ``bound`` on the side of its estimate (0
    for a test of no difference): from the t-interval's ``se`` and ``df``, or the share of bootstrap draws on
    the other side of ``bound``; None when ``d`` carries neither."""
    if not math.isfinite(d.value):
        return None
    edge = math.copysign(bound, d.value)
    if d.se is not None and d.df is not None:
        if d.se <= 0:
            return 0.0 if abs(d.value) > bound else 1.0
        return float(min(1.0, 2 * student_t.sf((abs(d.value) - bound) / d.se, d.df)))
    if d.draws:
        draws = np.asarray(d.draws)
        other = np.mean(draws <= edge) if d.value > 0 else np.mean(draws >= edge)
        return float(min(1.0, 2 * other))
    return None
