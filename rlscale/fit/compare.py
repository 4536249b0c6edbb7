"""Comparing variants (App. A.7 and Section 4): seed spread, ranking, and the leave-one-out table, each
difference with its interval (rlscale.fit.differences) and what it resolves (rlscale.fit.verdicts).

- Seeds: runs of one variant (folder name without ``_s<N>``) are fitted separately; the variant's A, B and
  C_mid are their means and the seed spread is the standard deviation of A and B (paper: 3 runs varied
  by at most +-0.015 in A, hence the +-0.02 margin).
- Ranking (per sweep folder): tiers by A, then by B at the tier's mean A, ties shown as ties
  (rlscale.fit.ranking); variants whose A is not identified are not ranked.
- LOO (a sweep.json with a ``base`` and variants with an ``axis``): A is averaged over the sweep's runs
  whose A is identified, every run is refit with that fixed A, and each reversion is compared with the
  base: dA (free fits) and dB (fixed-A refits) with intervals, the minimum effect on B, and a verdict.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from rlscale.fit.differences import Pooled, Samples, difference, mean_draws
from rlscale.fit.forms import SigmoidParams
from rlscale.fit.noise import eval_noise
from rlscale.fit.ranking import tiers
from rlscale.fit.run import bootstrap_draws, refit_with_a
from rlscale.fit.schema import (BASE, MORE_COMPUTE, NOT_IDENTIFIED, UNRESOLVED, ComparisonRow, Difference,
                                EvalNoise, FitSettings, RunFit)
from rlscale.fit.verdicts import ceiling_resolved, efficiency_resolved, min_effect, seeds_to_resolve, verdict


@dataclass
class VariantFit:
    """The ok runs (seeds) of one variant of a sweep, their mean parameters and (cached) fixed-A refits
    and bootstrap draws."""

    sweep: str
    variant: str
    runs: List[RunFit]
    fixed: Dict[float, List[Optional[SigmoidParams]]] = field(default_factory=dict, repr=False)
    draws: Dict[Optional[float], Optional[np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def A(self) -> float:
        return statistics.fmean(r.A for r in self.runs)

    @property
    def B(self) -> float:
        return statistics.fmean(r.B for r in self.runs)

    @property
    def C_mid(self) -> float:
        return statistics.fmean(r.C_mid for r in self.runs)

    @property
    def unidentified(self) -> str:
        """Why A is not identified in some seed ("" when it is in all)."""
        return next((r.A_identified_reason or NOT_IDENTIFIED for r in self.runs if r.A_identified is False), "")

    def refits(self, a: float, settings: FitSettings) -> List[Optional[SigmoidParams]]:
        """Each seed refit with A held at ``a`` (None where the paper method's grid finds no fit)."""
        if a not in self.fixed:
            self.fixed[a] = [_refit(r, a, settings) for r in self.runs]
        return self.fixed[a]

    def b_values(self, a: float, settings: FitSettings) -> List[float]:
        return [p.B if p is not None else math.nan for p in self.refits(a, settings)]

    def b_at(self, a: float, settings: FitSettings) -> float:
        """Mean B of the seeds refit at ``a``; NaN when a refit finds no fit."""
        return statistics.fmean(self.b_values(a, settings))

    def samples(self, settings: FitSettings, a: Optional[float], with_draws: bool) -> Samples:
        """A (``a`` None) or B at fixed ``a``, per seed, with the bootstrap draws of the mean if asked."""
        seeds = [r.A for r in self.runs] if a is None else self.b_values(a, settings)
        if with_draws and settings.n_boot > 0 and a not in self.draws:
            fits = [None] * len(self.runs) if a is None else self.refits(a, settings)
            self.draws[a] = (None if any(f is None for f in fits) and a is not None
                             else mean_draws([bootstrap_draws(r, settings, f) for r, f in zip(self.runs, fits)]))
        return Samples(seeds=seeds, draws=self.draws.get(a) if with_draws else None)


@dataclass
class Sweep:
    """The variants of one sweep and the differences between them."""

    members: List[VariantFit]
    settings: FitSettings

    @property
    def identified(self) -> List[VariantFit]:
        return [v for v in self.members if not v.unidentified]

    @property
    def pooled_a(self) -> Optional[Pooled]:
        """The seed sd of A pooled over the variants whose A is identified."""
        return Pooled.of([[r.A for r in v.runs] for v in self.identified])

    def d_a(self, p: VariantFit, q: VariantFit) -> Difference:
        boot = len(p.runs) < 2 or len(q.runs) < 2
        return difference(p.samples(self.settings, None, boot), q.samples(self.settings, None, boot), self.pooled_a,
                          self.settings.ci_level)

    def d_b(self, p: VariantFit, q: VariantFit, a: float) -> Optional[Difference]:
        if not (math.isfinite(p.b_at(a, self.settings)) and math.isfinite(q.b_at(a, self.settings))):
            return None
        boot = len(p.runs) < 2 or len(q.runs) < 2
        return difference(p.samples(self.settings, a, boot), q.samples(self.settings, a, boot), self.pooled_b(a),
                          self.settings.ci_level)

    def d_b_free(self, p: VariantFit, q: VariantFit) -> Difference:
        """dB of the free fits (each variant at its own A), from seeds only (no bootstrap draws)."""
        pooled = Pooled.of([[r.B for r in v.runs] for v in self.identified])
        return difference(Samples([r.B for r in p.runs], None), Samples([r.B for r in q.runs], None), pooled,
                          self.settings.ci_level)

    def pooled_b(self, a: float) -> Optional[Pooled]:
        return Pooled.of([v.b_values(a, self.settings) for v in self.identified])

    def effect(self, a: float, base_b: float) -> Optional[float]:
        pooled = self.pooled_b(a)
        return min_effect(pooled.sd if pooled is not None else None, base_b)


def compare(runs: List[RunFit], sweeps: Dict[str, dict], settings: FitSettings) -> List[ComparisonRow]:
    """Set the seed spread on ``runs`` and return the ranking and LOO rows of every sweep."""
    variants = _variants(runs)
    for v in variants:
        if len(v.runs) > 1:
            std_a, std_b = statistics.stdev(r.A for r in v.runs), statistics.stdev(r.B for r in v.runs)
            for r in v.runs:
                r.seed_std_A, r.seed_std_B = std_a, std_b
    rows: List[ComparisonRow] = []
    for name in sorted({r.sweep for r in runs}):
        sweep = Sweep([v for v in variants if v.sweep == name], settings)
        failed = sorted({r.variant for r in runs if r.sweep == name} - {v.variant for v in sweep.members})
        rows += _ranking(name, sweep, failed)
        entries = _loo_entries(sweeps.get(name))
        if entries:
            noise = eval_noise(runs, name, settings.margin)
            rows += _loo(name, entries, sweep, noise if noise is not None and noise.flagged else None)
    return rows


def _refit(run: RunFit, a: float, settings: FitSettings) -> Optional[SigmoidParams]:
    try:
        return refit_with_a(run, a, settings)
    except RuntimeError:
        return None


def _loo_entries(spec) -> List[Tuple[str, str]]:
    """(variant, axis) of a LOO sweep.json, base first (axis ""); [] when the sweep is not a LOO sweep (no
    base, no variant with an axis, or a ``kind`` other than "loo", e.g. a grid whose cells name their axes)."""
    if (not isinstance(spec, dict) or not isinstance(spec.get("base"), str)
            or not isinstance(spec.get("variants"), list) or spec.get("kind", "loo") != "loo"):
        return []
    entries: Dict[str, str] = {}
    for v in spec["variants"]:
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            entries.setdefault(v["name"], str(v.get("axis") or ""))
    if spec["base"] not in entries or not any(entries.values()):
        return []
    return sorted(entries.items(), key=lambda item: item[0] != spec["base"])


def _variants(runs: List[RunFit]) -> List[VariantFit]:
    groups: Dict[Tuple[str, str], List[RunFit]] = {}
    for r in runs:
        if r.fitted:
            groups.setdefault((r.sweep, r.variant), []).append(r)
    return [VariantFit(sweep=s, variant=v, runs=rs) for (s, v), rs in sorted(groups.items())]


def _ranking(name: str, sweep: Sweep, failed: List[str]) -> List[ComparisonRow]:
    s = sweep.settings
    rows: List[ComparisonRow] = []
    a_tiers = tiers(sweep.identified, lambda v: v.A, lambda v: v.variant,
                    lambda top, v: ceiling_resolved(sweep.d_a(top, v), s.margin))
    rank = 0
    for t, a_tier in enumerate(a_tiers):
        a = statistics.fmean(v.A for v in a_tier)
        b_tiers = [a_tier]
        if len(a_tier) > 1:
            b_tiers = tiers(a_tier, lambda v: _finite(v.b_at(a, s)), lambda v: v.variant,
                            lambda top, v: efficiency_resolved(sweep.d_b(top, v, a), sweep.d_b_free(top, v),
                                                               sweep.effect(a, top.b_at(a, s))))
        for u, b_tier in enumerate(b_tiers):
            rank += 1
            for v in b_tier:
                row = ComparisonRow(kind="rank", sweep=name, variant=v.variant, rank=rank, A=v.A, B=v.B,
                                    C_mid=v.C_mid, tie=len(b_tier) > 1)
                notes = [f"mean of {len(v.runs)} seeds"] if len(v.runs) > 1 else []
                reference = a_tier[0] if v is not a_tier[0] else (a_tiers[t - 1][0] if t else None)
                if reference is not None:
                    _set_interval(row, sweep.d_a(v, reference), "dA")
                    notes.append(f"dA vs {reference.variant}")
                if len(a_tier) > 1:
                    row.A_fixed, row.B_fixed = a, v.b_at(a, s)
                    if v is not b_tier[0] or u:
                        top = b_tier[0] if v is not b_tier[0] else b_tiers[u - 1][0]
                        d_b = sweep.d_b(v, top, a)
                        if d_b is not None:
                            _set_interval(row, d_b, "dB")
                        notes.append(f"A not separated from {a_tier[0].variant}: B refit at A={a:.3f}, dB vs "
                                     f"{top.variant}")
                if row.tie:
                    notes.append("tie with " + ", ".join(o.variant for o in b_tier if o is not v))
                row.note = "; ".join(notes)
                rows.append(row)
    for v in sweep.members:
        if v.unidentified:
            rows.append(ComparisonRow(kind="rank", sweep=name, variant=v.variant, A=v.A, B=v.B, C_mid=v.C_mid,
                                      reason=NOT_IDENTIFIED, needs=MORE_COMPUTE,
                                      note=f"not ranked: {v.unidentified}"))
    rows += [ComparisonRow(kind="rank", sweep=name, variant=n, note="no ok fit") for n in failed]
    return rows


def _loo(name: str, entries: List[Tuple[str, str]], sweep: Sweep, noise: Optional[EvalNoise]) -> List[ComparisonRow]:
    s = sweep.settings
    pooled_a = sweep.pooled_a
    seeds = seeds_to_resolve(pooled_a.sd if pooled_a is not None else None, s.margin, s.ci_level)
    by_name = {v.variant: v for v in sweep.members}
    base_name = entries[0][0]
    pooled = [r for v in sweep.identified for r in v.runs]
    if not pooled:
        return [ComparisonRow(kind="loo", sweep=name, variant=n, axis=ax, verdict=UNRESOLVED, reason=NOT_IDENTIFIED,
                              needs=MORE_COMPUTE, note="no run of the sweep has an identified A")
                if n in by_name else ComparisonRow(kind="loo", sweep=name, variant=n, axis=ax, note="no ok fit")
                for n, ax in entries]
    a_fixed = statistics.fmean(r.A for r in pooled)
    base = by_name.get(base_name)
    rows = []
    for variant, axis in entries:
        v = by_name.get(variant)
        if v is None:
            rows.append(ComparisonRow(kind="loo", sweep=name, variant=variant, axis=axis, A_fixed=a_fixed,
                                      note="no ok fit"))
            continue
        row = ComparisonRow(kind="loo", sweep=name, variant=variant, axis=axis, A=v.A, B=v.B, C_mid=v.C_mid,
                            A_fixed=a_fixed, B_fixed=v.b_at(a_fixed, s))
        if v.unidentified:
            row.note = v.unidentified
        if base is None:
            row.note = f"base {base_name!r} has no ok fit"
        elif variant == base_name:
            row.verdict = BASE
        else:
            d_a, d_b = sweep.d_a(v, base), sweep.d_b(v, base, a_fixed)
            effect = sweep.effect(a_fixed, base.b_at(a_fixed, s))
            _set_interval(row, d_a, "dA")
            if d_b is not None:
                _set_interval(row, d_b, "dB")
            row.min_effect_B = effect
            if base.unidentified and not v.unidentified:
                row.note = f"base: {base.unidentified}"
            found = verdict(d_a, d_b, sweep.d_b_free(v, base), s.margin, effect,
                            not (v.unidentified or base.unidentified), noise is not None, seeds,
                            noise.samples_needed if noise is not None else None)
            row.verdict, row.reason, row.needs = found.verdict, found.reason, found.needs
        rows.append(row)
    return rows


def _set_interval(row: ComparisonRow, d: Difference, which: str) -> None:
    setattr(row, which, d.value)
    setattr(row, f"{which}_lo", d.lo)
    setattr(row, f"{which}_hi", d.hi)
    row.interval_source = d.source


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf
