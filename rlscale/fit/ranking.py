"""The ranking of a sweep's variants: one transitive rule (App. A.7: "if two methods' A are within 0.02,
refit both with the average A; higher B is at least as good").

1. Variants whose A is not identified (rlscale.fit.one_run) are not ranked (rank None, with the reason).
2. The others are sorted by A (seed mean; name breaks exact ties) and cut into **A tiers** from the top:
   a variant joins the current tier unless its dA to the tier's *first* member is a ceiling finding
   (rlscale.fit.verdicts.ceiling_resolved: beyond the margin, interval excluding 0), in which case it
   starts the next tier.
3. Inside an A tier of several variants, all are refit at the tier's mean A and cut the same way into
   **B tiers** by B (a new B tier only where dB to the B tier's first member is an efficiency finding).
4. Ranks are dense over (A tier, B tier): variants of one B tier share a rank and are marked ``tie``.

Each cut compares a variant with one fixed reference (the tier's first member), so tiers are consecutive
blocks of a sorted list and the ranks are a strict weak order by construction: "ranked above" is
transitive and "tied" an equivalence, whatever the intervals (a pairwise "within the margin" relation
is not transitive: 0.60 ~ 0.615 ~ 0.63 but 0.60 !~ 0.63).
"""
from __future__ import annotations

from typing import Callable, List, Sequence, TypeVar

T = TypeVar("T")


def tiers(items: Sequence[T], value: Callable[[T], float], name: Callable[[T], str],
          separated: Callable[[T, T], bool]) -> List[List[T]]:
    """``items`` sorted by ``value`` (highest first, then ``name``) and cut into consecutive tiers: an
    item starts a new tier when ``separated(first of the current tier, item)``."""
    groups: List[List[T]] = []
    for item in sorted(items, key=lambda v: (-value(v), name(v))):
        if groups and not separated(groups[-1][0], item):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups
