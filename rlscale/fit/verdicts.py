"""What a difference between two variants resolves (Section 4's LOO verdicts and the ranking's tiers).

- **Ceiling** (``higher``/``lower ceiling``): |dA| > margin (the paper's 0.02, App. A.7) and an interval of
  dA that excludes 0. With a bootstrap interval (a variant with one seed) the interval does not see the
  run-to-run spread that the paper's margin stands for, so the whole interval must lie beyond the margin.
- **Efficiency** (``higher``/``lower efficiency``): |dA| within the margin, a seed interval of dB (B refit at
  the sweep's fixed A) that excludes 0, |dB| >= the minimum effect, and the free fits' B (each variant at
  its own A) differing in the same direction with a seed interval that excludes 0. B at the fixed A absorbs
  whatever difference in A the margin leaves (at paper-scale noise 0.01 in A moves it by ~0.3, the size of
  the seed spread), so without the free-B check a null axis whose A drew low reads "lower efficiency"; the
  check asks for a difference in efficiency, not a leftover difference in ceiling. The minimum effect is twice the
  sweep's pooled seed sd of B at the fixed A (at least 5 % of the base's B): a difference that a single
  pair of runs orders correctly 92 % of the time (Phi(2 / sqrt 2)); a smaller one, however clean its
  interval, is within the seed spread and not a finding. At paper-scale noise (A jittered by 0.008 per
  seed) the seed sd of B at fixed A is ~0.2, six times the bootstrap's, so one-seed variants get no
  efficiency verdict (``unresolved``, ``one seed``).
- **within margin** (resolved, no difference): the dA interval inside +-margin and, for the efficiency
  part, the dB interval inside +-minimum effect.
- **unresolved** otherwise, with a reason and what would resolve it: ``A not identified`` (more compute),
  ``eval noise`` (the sweep's median eval SE > margin / 2: more eval samples), ``one seed`` (more seeds),
  ``interval straddles the margin`` (more seeds), ``no interval`` (--n-boot > 0 or more seeds).
  The number is given where the data tell it: eval samples per eval that bring the median eval SE to half
  the margin (rlscale.fit.noise), and seeds per variant that bring the seed half-width of dA to half the
  margin at the sweep's pooled seed sd of A (``seeds_to_resolve``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from scipy.stats import norm

from rlscale.fit.differences import BOOTSTRAP, NONE
from rlscale.fit.schema import (EVAL_NOISE, HIGHER_CEILING, HIGHER_EFFICIENCY, LOWER_CEILING, LOWER_EFFICIENCY,
                                MORE_COMPUTE, MORE_EVAL_SAMPLES, MORE_SEEDS, NO_INTERVAL, NOT_IDENTIFIED, ONE_SEED,
                                STRADDLES, UNRESOLVED, WITHIN_MARGIN, Difference)

MIN_EFFECT_SDS = 2.0
MIN_EFFECT_FLOOR = 0.05


@dataclass(frozen=True)
class Verdict:
    """A verdict with, when ``unresolved``, why and what would resolve it."""

    verdict: str
    reason: str = ""
    needs: str = ""


def min_effect(seed_sd_b: Optional[float], base_b: float) -> Optional[float]:
    """The smallest |dB| that counts (module docstring); None without a seed spread of B."""
    if seed_sd_b is None:
        return None
    return max(MIN_EFFECT_SDS * seed_sd_b, MIN_EFFECT_FLOOR * abs(base_b))


def seeds_to_resolve(sd_a: Optional[float], margin: float, level: float) -> Optional[int]:
    """Seeds per variant for which the interval of dA, z * sd * sqrt(2 / n), is at most half the margin: a
    null axis then reads ``within margin`` and a difference of twice the margin a ceiling finding. None
    without a pooled seed sd of A."""
    if sd_a is None or margin <= 0:
        return None
    z = float(norm.ppf((1 + level) / 2))
    return max(2, math.ceil(2 * (z * sd_a / (margin / 2)) ** 2))


def ceiling_resolved(d_a: Difference, margin: float) -> bool:
    """dA is a ceiling finding: beyond the margin and its interval excludes 0 (the whole bootstrap interval
    beyond the margin)."""
    if abs(d_a.value) <= margin or not d_a.has_interval:
        return False
    return d_a.beyond(margin) if d_a.source == BOOTSTRAP else d_a.excludes_zero()


def efficiency_resolved(d_b: Optional[Difference], d_b_free: Optional[Difference], effect: Optional[float]) -> bool:
    """dB at the fixed A (seed interval) is an efficiency finding: its interval excludes 0, |dB| >= the minimum
    effect, and the free fits' dB has the same sign with a seed interval excluding 0."""
    return (d_b is not None and d_b_free is not None and effect is not None and d_b.source.startswith("seeds")
            and d_b.excludes_zero() and abs(d_b.value) >= effect and d_b_free.source.startswith("seeds")
            and d_b_free.excludes_zero() and (d_b_free.value > 0) == (d_b.value > 0))


def verdict(d_a: Difference, d_b: Optional[Difference], d_b_free: Optional[Difference], margin: float,
            effect: Optional[float], identified: bool, noisy: bool, seeds_needed: Optional[int] = None,
            samples_needed: Optional[float] = None) -> Verdict:
    """The LOO verdict of a reversion vs the base (module docstring); ``seeds_needed`` and ``samples_needed``
    put a number on what resolves it."""
    more_seeds = MORE_SEEDS + (f" (about {seeds_needed} per variant)" if seeds_needed else "")
    if not identified:
        return Verdict(UNRESOLVED, NOT_IDENTIFIED, MORE_COMPUTE)
    if d_a.source == NONE:
        return Verdict(UNRESOLVED, NO_INTERVAL, MORE_SEEDS)
    if ceiling_resolved(d_a, margin):
        return Verdict(HIGHER_CEILING if d_a.value > 0 else LOWER_CEILING)
    if abs(d_a.value) <= margin and efficiency_resolved(d_b, d_b_free, effect):
        return Verdict(HIGHER_EFFICIENCY if d_b.value > 0 else LOWER_EFFICIENCY)
    b_known = d_b is not None and effect is not None and d_b.source.startswith("seeds")
    if d_a.inside(margin) and b_known and d_b.inside(effect):
        return Verdict(WITHIN_MARGIN)
    if noisy:
        more_samples = MORE_EVAL_SAMPLES + (f" (about {samples_needed:,.0f} per eval)" if samples_needed else "")
        return Verdict(UNRESOLVED, EVAL_NOISE, more_samples + (f", {more_seeds}" if seeds_needed else ""))
    if d_a.source == BOOTSTRAP or (d_b is not None and d_b.source == BOOTSTRAP):
        return Verdict(UNRESOLVED, ONE_SEED, more_seeds)
    return Verdict(UNRESOLVED, STRADDLES, more_seeds)
