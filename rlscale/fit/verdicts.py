"""What a difference between two variants resolves (Section 4's LOO verdicts and the ranking's tiers).

Every interval here is a seed interval (rlscale.fit.pairing: paired by seed where the variants share seeds,
else unpaired), except in predictions of one-seed variants (rlscale.fit.predict), which may use a bootstrap.

- **Ceiling** (``higher``/``lower ceiling``): |dA| > margin (the paper's 0.02, App. A.7) and an interval of
  dA that excludes 0. A bootstrap interval does not see the run-to-run spread that the paper's margin
  stands for, so there the whole interval must lie beyond the margin.
- **Efficiency** (``higher``/``lower efficiency``): |dA| within the margin, an interval of dB (B refit at the
  sweep's fixed A) that excludes 0, and the free fits' B (each variant at its own A) differing in the same
  direction with an interval that excludes 0. The paper uses no margin on B ("higher B is at least as
  good"), so the interval alone decides: its DAPO-loss reversion (dB -0.24 at B about 2) is a finding as
  soon as the seeds resolve it. B at the fixed A absorbs whatever difference in A the margin leaves (at
  paper-scale noise 0.01 in A moves it by about 0.3), so without the free-B check a null axis whose A drew
  low would read "lower efficiency"; the check asks for a difference in efficiency, not a leftover
  difference in ceiling, and keeps the false findings on null axes at the interval's level.
- **within margin** (resolved, no difference): the dA interval inside +-margin, and the dB interval inside
  +-``margin_b`` x the base's B and containing 0 (never when it excludes 0). ``margin_b`` (default 10 %) is
  below the paper's smallest reported efficiency finding (DAPO, 12 % of B), so "within margin" rules out an
  effect of that size.
- **unresolved** otherwise, with a reason and what would resolve it: ``A not identified`` (more compute),
  ``one seed`` (no seed spread to compare with: more seeds), ``dB resolved but not the free fits' B`` (more
  seeds), or the two sources of the run-to-run variance in the order of their share (rlscale.fit.noise):
  ``eval noise`` (the runs' own fits, mostly the eval's sampling; more distinct eval prompts), ``drift within
  runs`` (the runs' own fits, mostly the reward's drift between evals, which more prompts do not shrink; more
  seeds) and ``seed spread`` (what differs between runs beyond that; more seeds). The numbers are given where the data
  tell them: the seeds per variant that bring the half-width of dA to half the margin at the sweep's spread
  (``seeds_to_resolve``), and the distinct eval prompts that would, at the present seeds, when fewer eval
  noise alone can do it (``prompts_to_resolve``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from scipy.stats import norm

from rlscale.fit.differences import BOOTSTRAP
from rlscale.fit.family import p_beyond, rule_name
from rlscale.fit.results import (CEILING_OR_EFFICIENCY, DRIFT, EVAL_NOISE, HIGHER_CEILING, HIGHER_EFFICIENCY,
                                LOWER_CEILING, LOWER_EFFICIENCY, MORE_COMPUTE, MORE_EVAL_PROMPTS, MORE_SEEDS, MULTIPLE_COMPARISONS,
                                NOT_IDENTIFIED, ONE_SEED, SEED_SPREAD, UNRESOLVED, WITHIN_MARGIN, Difference)


@dataclass(frozen=True)
class Verdict:
    """A verdict with, when ``unresolved``, why and what would resolve it."""

    verdict: str
    reason: str = ""
    needs: str = ""


@dataclass(frozen=True)
class Resolution:
    """What would resolve a comparison: seeds per variant, distinct eval prompts per eval (None where that
    source alone cannot), the share of the run-to-run variance that the runs' own fits make (None unknown) and,
    of that, the share the eval's sampling makes (``sampling``; the rest is the reward's drift within runs)."""

    seeds: Optional[int] = None
    prompts: Optional[float] = None
    eval_share: Optional[float] = None
    sampling: Optional[float] = None


def _z(level: float) -> float:
    return float(norm.ppf((1 + level) / 2))


def seeds_to_resolve(sd: Optional[float], margin: float, level: float, paired: bool = True) -> Optional[int]:
    """Seeds per variant for which the interval of dA, z * sd * sqrt(2 / n) (paired: sd of one run's
    deviation; unpaired the same for two variants of n seeds), is at most half the margin: a null axis then
    reads ``within margin`` and a difference of twice the margin a ceiling finding. None without a spread."""
    if sd is None or margin <= 0:
        return None
    return max(2, math.ceil(2 * (_z(level) * sd / (margin / 2)) ** 2))


def prompts_to_resolve(sd: Optional[float], eval_share: Optional[float], seeds: int, prompts: Optional[float],
                       margin: float, level: float) -> Optional[float]:
    """Distinct eval prompts per eval that bring the half-width of dA to half the margin at ``seeds`` seeds,
    shrinking only the eval-noise share of the variance (as 1 / prompts); None when eval noise alone cannot."""
    if sd is None or eval_share is None or prompts is None or seeds < 1 or eval_share <= 0:
        return None
    allowed = (margin / 2) ** 2 * seeds / (2 * _z(level) ** 2 * sd ** 2)  # the variance fraction to keep
    rest = allowed - (1 - eval_share)
    return prompts * eval_share / rest if rest > 0 else None


def ceiling_resolved(d_a: Difference, margin: float, level: Optional[float] = None) -> bool:
    """dA is a ceiling finding: beyond the margin and its interval excludes 0 (the whole bootstrap interval
    beyond the margin), the interval read at ``level`` when given (the level a family leaves to one
    comparison, rlscale.fit.family)."""
    d_a = d_a if level is None else d_a.at_level(level)
    if abs(d_a.value) <= margin or not d_a.has_interval:
        return False
    return d_a.beyond(margin) if d_a.source == BOOTSTRAP else d_a.excludes_zero()


def efficiency_resolved(d_b: Optional[Difference], d_b_free: Optional[Difference],
                        level: Optional[float] = None) -> bool:
    """dB at the fixed A is an efficiency finding: its interval excludes 0 and the free fits' dB has the same
    sign with an interval excluding 0 (both read at ``level`` when given)."""
    if d_b is None or d_b_free is None:
        return False
    if level is not None:
        d_b, d_b_free = d_b.at_level(level), d_b_free.at_level(level)
    return d_b.excludes_zero() and d_b_free.excludes_zero() and (d_b_free.value > 0) == (d_b.value > 0)


def ceiling_p(d_a: Difference, margin: float) -> float:
    """The p-value of dA as a ceiling finding (the test ``ceiling_resolved`` makes at level 1 - p): 1 within
    the margin or without an interval; a difference without ``se`` or draws is 0 or 1 as its interval says."""
    if abs(d_a.value) <= margin or not d_a.has_interval:
        return 1.0
    p = p_beyond(d_a, margin if d_a.source == BOOTSTRAP else 0.0)
    if p is None:
        return 0.0 if ceiling_resolved(d_a, margin) else 1.0
    return p


def efficiency_p(d_b: Optional[Difference], d_b_free: Optional[Difference]) -> float:
    """The p-value of an efficiency finding: both dB intervals must exclude 0 on one side, so the larger of
    their p-values (an intersection-union test); 1 when their signs differ or one is missing."""
    if (d_b is None or d_b_free is None or not d_b.has_interval or not d_b_free.has_interval
            or (d_b.value > 0) != (d_b_free.value > 0)):
        return 1.0
    ps = [p_beyond(d, 0.0) for d in (d_b, d_b_free)]
    if any(p is None for p in ps):
        return 0.0 if efficiency_resolved(d_b, d_b_free) else 1.0
    return max(ps)


@dataclass(frozen=True)
class Decisions:
    """What a family's correction (rlscale.fit.family) leaves of one LOO row's two tests: whether the ceiling
    and the efficiency finding stand, the smaller of the row's two p-values alone and after adjustment, the
    number of comparisons, and the level at which ``within margin`` reads its intervals (the family's
    per-comparison level). The default judges the row alone at 95 %."""

    ceiling: Optional[bool] = None
    efficiency: Optional[bool] = None
    p: Optional[float] = None
    p_adjusted: Optional[float] = None
    size: int = 1
    method: str = "none"
    alpha: float = 0.05
    within_level: Optional[float] = None


def verdict(d_a: Difference, d_b: Optional[Difference], d_b_free: Optional[Difference], margin: float,
            band_b: Optional[float], identified: bool, resolution: Resolution = Resolution(),
            decisions: Decisions = Decisions()) -> Verdict:
    """The LOO verdict of a reversion vs the base (module docstring); ``band_b`` is the within-margin band on
    dB (``margin_b`` x the base's B), ``resolution`` puts numbers on what resolves it, ``decisions`` what the
    table's family-wise correction left of the row's findings (a finding its interval shows alone but the
    correction does not keep reads ``unresolved (multiple comparisons ...)``)."""
    if not identified:
        return Verdict(UNRESOLVED, NOT_IDENTIFIED, MORE_COMPUTE)
    if not d_a.has_interval:
        return Verdict(UNRESOLVED, ONE_SEED, MORE_SEEDS + " (at least 2 for some variant, to measure the spread)")
    ceiling = ceiling_resolved(d_a, margin) if decisions.ceiling is None else decisions.ceiling
    if ceiling:
        return Verdict(HIGHER_CEILING if d_a.value > 0 else LOWER_CEILING)
    more_seeds = MORE_SEEDS + (f" (about {resolution.seeds} per variant)" if resolution.seeds else "")
    efficiency = abs(d_a.value) <= margin and (efficiency_resolved(d_b, d_b_free) if decisions.efficiency is None
                                               else decisions.efficiency)
    if efficiency:
        return Verdict(HIGHER_EFFICIENCY if d_b.value > 0 else LOWER_EFFICIENCY)
    if decisions.p is not None and decisions.p <= decisions.alpha and (
            ceiling_resolved(d_a, margin) or (abs(d_a.value) <= margin and efficiency_resolved(d_b, d_b_free))):
        return Verdict(UNRESOLVED, f"{MULTIPLE_COMPARISONS} (p = {decisions.p:.2g} alone, {decisions.p_adjusted:.2g} "
                       f"after {rule_name(decisions.method)} over {decisions.size})", more_seeds)
    if d_b is not None and d_b.excludes_zero() and abs(d_a.value) <= margin:
        return Verdict(UNRESOLVED, CEILING_OR_EFFICIENCY, more_seeds)
    a_read = d_a if decisions.within_level is None else d_a.at_level(decisions.within_level)
    b_read = d_b if d_b is None or decisions.within_level is None else d_b.at_level(decisions.within_level)
    b_within = b_read is not None and band_b is not None and b_read.inside(band_b) and not d_b.excludes_zero()
    if a_read.inside(margin) and b_within:
        return Verdict(WITHIN_MARGIN)
    more_prompts = (MORE_EVAL_PROMPTS + f" (about {resolution.prompts:,.0f} per eval)"
                    if resolution.prompts is not None else "")
    if resolution.eval_share is not None and resolution.eval_share > 0.5:
        share = f" ({resolution.eval_share:.0%} of the variance)"
        if resolution.sampling is not None and resolution.sampling < 0.5:
            share = (f" ({resolution.eval_share:.0%} of the variance, the eval's sampling "
                     f"{resolution.sampling:.0%} of it)")
            return Verdict(UNRESOLVED, DRIFT + share, ", ".join(n for n in (more_seeds, more_prompts) if n))
        return Verdict(UNRESOLVED, EVAL_NOISE + share, ", ".join(n for n in (more_prompts, more_seeds) if n))
    share = f" ({1 - resolution.eval_share:.0%} of the variance)" if resolution.eval_share is not None else ""
    return Verdict(UNRESOLVED, SEED_SPREAD + share, ", ".join(n for n in (more_seeds, more_prompts) if n))

