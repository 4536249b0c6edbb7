"""Differences between variants from their seeds, paired where seeds share their random numbers (Section 4,
App. A.7).

rlscale's trainer draws everything random from the run's ``seed``: two variants run with the same seed see
the same prompts in the same order and the same sampling and eval draws (common random numbers), so a
seed's luck moves both the same way (on the embedded default every seed-0 curve sits above every seed-1
curve). A comparison that pairs runs by seed cancels that shared part; one that compares seed means does
not, and its interval is as wide as the seed effect.

**Paired** (``paired n=k``): the per-seed values of a sweep's variants (A, or B at a fixed A) are fitted with
the additive model value[v, s] = mu_v + sigma_s + e_vs by least squares over every run of the sweep; the
residual variance s_e^2 (df = runs - rank of the design) is the run-to-run spread that pairing leaves.
A difference p - q is the mean over their common seeds of value[p, s] - value[q, s], with the interval
d +- t(level, df) * s_e * sqrt(2 / k) for k common seeds. The spread is pooled over the whole sweep, as the
paper's single margin is, so a variant of one seed is compared with the spread its neighbours show; with no
spread to borrow (every variant one seed: df = 0) there is no interval.

**Unpaired** (``unpaired n=a/b``, when pairing is off, the two variants share no seed, or the seed table
leaves no degree of freedom for the paired spread): the difference of the seed means,
d +- t(level, df) * s * sqrt(1/a + 1/b), with s the within-variant seed sd pooled over the sweep's variants
of >= 2 seeds.

A variant's seeds are compared only with the seed spread of other runs, never with a single run's
bootstrap: a run's own interval sees its eval noise, not the run-to-run spread (a one-seed verdict from
it gave 4 false ceiling verdicts in 50 null axes at a seed sd of A of 0.012).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from scipy.stats import t as student_t

from rlscale.fit.differences import Pooled
from rlscale.fit.results import Difference

Values = Dict[object, float]  # seed (int; another key for a run without a seed, never shared) -> value
PAIRED, UNPAIRED, NONE = "paired", "unpaired", "none"


@dataclass(frozen=True)
class SeedTable:
    """The per-seed values of a sweep's variants, the paired spread (additive model) and the unpaired one
    (within-variant seed sd, pooled)."""

    values: Dict[str, Values]
    paired: Optional[Pooled]
    unpaired: Optional[Pooled]
    pairing: bool

    @classmethod
    def of(cls, values: Dict[str, Values], pairing: bool = True) -> "SeedTable":
        finite = {v: {s: x for s, x in seeds.items() if math.isfinite(x)} for v, seeds in values.items()}
        return cls(values=finite, paired=_additive_spread(finite) if pairing else None,
                   unpaired=Pooled.of([list(v.values()) for v in finite.values()]), pairing=pairing)

    def common(self, p: str, q: str) -> Tuple[Optional[int], ...]:
        seeds = set(self.values.get(p, {})) & set(self.values.get(q, {}))
        return tuple(sorted(s for s in seeds if isinstance(s, int)))

    def difference(self, p: str, q: str, level: float) -> Difference:
        """p - q with its interval (module docstring)."""
        vp, vq = self.values.get(p, {}), self.values.get(q, {})
        if not vp or not vq:
            return Difference(math.nan, None, None, NONE)
        common = self.common(p, q)
        if self.pairing and common and (self.paired is not None or self.unpaired is None):
            value = statistics.fmean(vp[s] - vq[s] for s in common)
            source = f"{PAIRED} n={len(common)}"
            if self.paired is None:
                return Difference(value, None, None, source)
            se = self.paired.sd * math.sqrt(2 / len(common))
            half = _t(level, self.paired.df) * se
            return Difference(value, value - half, value + half, source, se=se, df=self.paired.df)
        value = statistics.fmean(vp.values()) - statistics.fmean(vq.values())
        n = len(vp) if len(vp) == len(vq) else f"{len(vp)}/{len(vq)}"
        source = f"{UNPAIRED} n={n}"
        if self.unpaired is None:
            return Difference(value, None, None, source)
        se = self.unpaired.sd * math.sqrt(1 / len(vp) + 1 / len(vq))
        half = _t(level, self.unpaired.df) * se
        return Difference(value, value - half, value + half, source, se=se, df=self.unpaired.df)

    def spread_for(self, p: str, q: str) -> Optional[Pooled]:
        """The spread behind the interval of p - q (paired or unpaired)."""
        paired = self.pairing and self.common(p, q) and (self.paired is not None or self.unpaired is None)
        return self.paired if paired else self.unpaired


def _t(level: float, df: int) -> float:
    return float(student_t.ppf((1 + level) / 2, df))


def _additive_spread(values: Dict[str, Values]) -> Optional[Pooled]:
    """The residual sd of value[v, s] = mu_v + sigma_s + e_vs over every (variant, seed) with a seed."""
    cells = [(v, s, x) for v, seeds in values.items() for s, x in seeds.items() if isinstance(s, int)]
    variants = sorted({v for v, _, _ in cells})
    seeds = sorted({s for _, s, _ in cells})
    if not cells or len(seeds) < 2:
        return None
    design = np.zeros((len(cells), len(variants) + len(seeds) - 1))
    for row, (v, s, _) in enumerate(cells):
        design[row, variants.index(v)] = 1.0
        if seeds.index(s):
            design[row, len(variants) + seeds.index(s) - 1] = 1.0
    y = np.array([x for _, _, x in cells])
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    df = len(cells) - int(rank)
    if df <= 0:
        return None
    residual = y - design @ coef
    return Pooled(sd=math.sqrt(float(residual @ residual) / df), df=df)


def variance_share(within: Sequence[float], spread: Optional[Pooled]) -> Optional[float]:
    """The share of the run-to-run variance that the runs' own fits account for (eval noise and drift within
    a run): the median squared standard error of the runs' A over the spread's variance, at most 1."""
    if spread is None or not within or spread.sd <= 0:
        return None
    return min(1.0, statistics.median(w * w for w in within) / spread.sd ** 2)
