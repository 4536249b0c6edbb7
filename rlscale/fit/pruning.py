"""The pruning rule: at a rung (a fraction of a sweep's planned compute) every variant is fitted on its
curve so far and its reward at the full planned compute predicted with an interval
(rlscale.fit.predict); a variant is stopped when its prediction is below the best variant's by more than
the margin with an interval of the difference that excludes 0 (a bootstrap interval: wholly beyond the
margin), the ceiling-verdict rule of rlscale.fit.verdicts applied to predicted rewards, and its A is
identified at the rung (rlscale.fit.one_run: a curve that has not bent yet is extrapolated from its lower half
and its prediction is not trusted to stop it). The gaps of one rung are one family: Holm over them
(rlscale.fit.family), so a rung of many null variants stops none with probability at least the level. Everything else goes on: a variant that cannot be fitted
yet, whose A is not identified, or whose difference the data do not resolve, is never stopped. The
paper's margin is 0.02 (App. A.7).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from rlscale.fit.family import HOLM, adjusted, family
from rlscale.fit.predict import VariantPrediction, gap, pooled_of, separated
from rlscale.fit.verdicts import ceiling_p
from rlscale.fit.results import Difference


@dataclass(frozen=True)
class PruneDecision:
    """One variant at a rung: its prediction at the full budget with interval, its gap to the best
    (best - this, None for the best itself) and whether it is stopped."""

    variant: str
    predicted: float
    lo: Optional[float]
    hi: Optional[float]
    gap: Optional[Difference]
    pruned: bool


def decide(predictions: Sequence[VariantPrediction], margin: float, level: float,
           correction: str = HOLM) -> List[PruneDecision]:
    """The decision for every variant with a prediction (module docstring); the best is the highest
    prediction (name breaks exact ties). The rung's gaps to the best are one family, Holm by default
    (rlscale.fit.family): a variant is stopped when its gap is separated at its adjusted p-value."""
    if not predictions:
        return []
    ordered = sorted(predictions, key=lambda p: (-p.value, p.variant))
    best, rest = ordered[0], ordered[1:]
    pooled = pooled_of(predictions)
    gaps = [gap(best, p, pooled, level) for p in rest]
    fam = family("each variant against the best at the full budget", len(rest), level, correction, fixed=True)
    p_values = [ceiling_p(d, margin) if p.identified and d.value > 0 else None
                for p, d in zip(rest, gaps)]
    adjusted_p = adjusted(p_values, fam)
    out = [PruneDecision(variant=best.variant, predicted=best.value, lo=best.lo, hi=best.hi, gap=None,
                         pruned=False)]
    for p, d, adj in zip(rest, gaps, adjusted_p):
        out.append(PruneDecision(variant=p.variant, predicted=p.value, lo=p.lo, hi=p.hi, gap=d,
                                 pruned=bool(adj is not None and adj <= fam.alpha and separated(d, margin))))
    return out
