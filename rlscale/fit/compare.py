"""Comparing variants (App. A.7 and Section 4): seed spread, ranking, and the leave-one-out table, each
difference with its interval (rlscale.fit.pairing: paired by seed where variants share seeds) and what it
resolves (rlscale.fit.verdicts).

- Seeds: runs of one variant (folder name without ``_s<N>``) are fitted separately; the variant's A, B and
  C_mid are their means and the seed spread is the standard deviation of A and B (paper: 3 runs varied
  by at most +-0.015 in A, hence the +-0.02 margin).
- Ranking (per sweep folder): tiers by A, then by B at the tier's mean A, ties shown as ties
  (rlscale.fit.ranking); variants whose A is not identified are not ranked. One row per variant; its note
  speaks of that variant only.
- LOO (a sweep.json with a ``base`` and variants with an ``axis``): A is averaged over the sweep's runs
  whose A is identified, every run is refit with that fixed A, and each reversion is compared with the
  base: dA (free fits) and dB (fixed-A refits) with intervals, the band of ``within margin`` on B, the
  share of eval noise in the variance, and a verdict.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from rlscale.fit.forms import SigmoidParams
from rlscale.fit.noise import eval_noise
from rlscale.fit.differences import Pooled
from rlscale.fit.pairing import SeedTable, Values
from rlscale.fit.ranking import tiers
from rlscale.fit.run import refit_with_a
from rlscale.fit.schema import (BASE, MORE_COMPUTE, NOT_IDENTIFIED, UNRESOLVED, ComparisonRow, Difference,
                                EvalNoise, FitSettings, RunFit)
from rlscale.fit.verdicts import (Resolution, ceiling_resolved, efficiency_resolved, prompts_to_resolve,
                                  seeds_to_resolve, verdict)


@dataclass
class VariantFit:
    """The ok runs (seeds) of one variant of a sweep, their mean parameters and (cached) fixed-A refits."""

    sweep: str
    variant: str
    runs: List[RunFit]
    fixed: Dict[float, List[Optional[SigmoidParams]]] = field(default_factory=dict, repr=False)

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
        """Why the variant's A is not identified ("" when it is): a seed whose A is at the edge of its range or
        whose curve has not bent (named), or more than half its seeds with an interval that reaches the edge
        (rlscale.fit.run)."""
        for r in self.runs:
            if r.A_identified is False and not r.A_interval_open:
                reason = r.A_identified_reason or NOT_IDENTIFIED
                return reason if len(self.runs) == 1 or r.seed is None else f"seed {r.seed}: {reason}"
        open_ = [r for r in self.runs if r.A_interval_open]
        if 2 * len(open_) > len(self.runs):
            reason = open_[0].A_identified_reason
            if len(self.runs) == 1:
                return reason
            return f"seeds {', '.join(str(r.seed) for r in open_)} of {len(self.runs)}: {reason}"
        return ""

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

    def by_seed(self, values: List[float]) -> Values:
        """``values`` (one per run) keyed by seed; a run without a seed gets a key no other variant shares."""
        return {(r.seed if r.seed is not None else (self.variant, i)): v for i, (r, v) in enumerate(zip(self.runs,
                                                                                                      values))}


@dataclass
class Sweep:
    """The variants of one sweep and the differences between them, from seed tables over its identified
    variants (rlscale.fit.pairing)."""

    members: List[VariantFit]
    settings: FitSettings
    tables: Dict[Optional[float], SeedTable] = field(default_factory=dict, repr=False)

    @property
    def identified(self) -> List[VariantFit]:
        return [v for v in self.members if not v.unidentified]

    def table(self, a: Optional[float] = None, free_b: bool = False) -> SeedTable:
        """The seed table of A (``a`` None), of B refit at ``a``, or of the free fits' B (``free_b``)."""
        key = math.inf if free_b else a
        if key not in self.tables:
            values = {v.variant: v.by_seed([r.B for r in v.runs] if free_b else
                                           [r.A for r in v.runs] if a is None else v.b_values(a, self.settings))
                      for v in self.identified}
            self.tables[key] = SeedTable.of(values, self.settings.paired)
        return self.tables[key]

    def d_a(self, p: VariantFit, q: VariantFit) -> Difference:
        return self._difference(self.table(), p, q, [r.A for r in p.runs], [r.A for r in q.runs])

    def d_b(self, p: VariantFit, q: VariantFit, a: float) -> Optional[Difference]:
        bp, bq = p.b_values(a, self.settings), q.b_values(a, self.settings)
        if not all(math.isfinite(b) for b in bp + bq):
            return None
        return self._difference(self.table(a), p, q, bp, bq)

    def d_b_free(self, p: VariantFit, q: VariantFit) -> Difference:
        """dB of the free fits (each variant at its own A)."""
        return self._difference(self.table(free_b=True), p, q, [r.B for r in p.runs], [r.B for r in q.runs])

    def _difference(self, table: SeedTable, p: VariantFit, q: VariantFit, vp: List[float],
                    vq: List[float]) -> Difference:
        """p - q from ``table``; a variant outside the table (A not identified) brings its own values and
        borrows the table's spread."""
        if p.variant in table.values and q.variant in table.values:
            return table.difference(p.variant, q.variant, self.settings.ci_level)
        values = {**table.values, p.variant: p.by_seed(vp), q.variant: q.by_seed(vq)}
        borrowed = SeedTable(values=values, paired=table.paired, unpaired=table.unpaired, pairing=table.pairing)
        return borrowed.difference(p.variant, q.variant, self.settings.ci_level)

    def spread_a(self, p: VariantFit, q: VariantFit) -> Optional[Pooled]:
        return self.table().spread_for(p.variant, q.variant)


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
            rows += _loo(name, entries, sweep, eval_noise(runs, name, settings.margin, settings.paired))
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
    """One row per variant (module docstring of rlscale.fit.ranking): rank, tie, dA to the variant it was
    compared with (the first of its A tier, or of the tier above for a tier's first), and within an A tier of
    several variants B at the tier's mean A with dB to the first of its B tier (or of the B tier above)."""
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
                            lambda top, v: efficiency_resolved(sweep.d_b(top, v, a), sweep.d_b_free(top, v)))
        for u, b_tier in enumerate(b_tiers):
            rank += 1
            for v in b_tier:
                rows.append(_rank_row(name, sweep, v, rank, a_tiers, t, b_tiers, u, a))
    for v in sweep.members:
        if v.unidentified:
            rows.append(ComparisonRow(kind="rank", sweep=name, variant=v.variant, A=v.A, B=v.B, C_mid=v.C_mid,
                                      reason=NOT_IDENTIFIED, needs=MORE_COMPUTE,
                                      note=f"not ranked: {v.unidentified}"))
    rows += [ComparisonRow(kind="rank", sweep=name, variant=n, note="no ok fit") for n in failed]
    return rows


def _rank_row(name: str, sweep: Sweep, v: VariantFit, rank: int, a_tiers: List[List[VariantFit]], t: int,
              b_tiers: List[List[VariantFit]], u: int, a: float) -> ComparisonRow:
    """The ranking row of ``v`` (A tier ``t``, B tier ``u`` of it), its note about itself only."""
    s = sweep.settings
    a_tier, b_tier = a_tiers[t], b_tiers[u]
    row = ComparisonRow(kind="rank", sweep=name, variant=v.variant, rank=rank, A=v.A, B=v.B, C_mid=v.C_mid,
                        tie=len(b_tier) > 1)
    notes = [f"{len(v.runs)} seeds"] if len(v.runs) > 1 else ["one seed"]
    reference = a_tier[0] if v is not a_tier[0] else (a_tiers[t - 1][0] if t else None)
    if reference is not None:
        d_a = sweep.d_a(v, reference)
        _set_interval(row, d_a, "dA")
        separated = v is a_tier[0]
        notes.append(f"dA vs {reference.variant}: " + ("beyond the margin, resolved" if separated else
                                                       "not resolved beyond the margin (same A tier)"))
    if len(a_tier) > 1:
        row.A_fixed, row.B_fixed = a, v.b_at(a, s)
        top = b_tier[0] if v is not b_tier[0] else (b_tiers[u - 1][0] if u else None)
        if top is not None:
            d_b = sweep.d_b(v, top, a)
            if d_b is not None:
                _set_interval(row, d_b, "dB")
            state = ("resolved: ranked below" if v is b_tier[0] else
                     "not resolved" if d_b is None or not d_b.excludes_zero() else
                     "interval excludes 0 but the free fits' B does not differ")
            notes.append(f"ordered by B at A={a:.3f}; dB vs {top.variant}: {state}")
    row.note = "; ".join(notes)
    return row


def _loo(name: str, entries: List[Tuple[str, str]], sweep: Sweep, noise: Optional[EvalNoise]) -> List[ComparisonRow]:
    s = sweep.settings
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
            _loo_verdict(row, sweep, v, base, a_fixed, noise)
        rows.append(row)
    return rows


def _loo_verdict(row: ComparisonRow, sweep: Sweep, v: VariantFit, base: VariantFit, a_fixed: float,
                 noise: Optional[EvalNoise]) -> None:
    """dA, dB, the band on dB, the eval-noise share and the verdict of reversion ``v`` against ``base``."""
    s = sweep.settings
    d_a, d_b = sweep.d_a(v, base), sweep.d_b(v, base, a_fixed)
    _set_interval(row, d_a, "dA")
    if d_b is not None:
        _set_interval(row, d_b, "dB")
    base_b = base.b_at(a_fixed, s)
    row.margin_B = s.margin_b * abs(base_b) if math.isfinite(base_b) else None
    if base.unidentified and not v.unidentified:
        row.note = f"base: {base.unidentified}"
    spread = sweep.spread_a(v, base)
    share = noise.share if noise is not None else None
    row.eval_share = share
    seeds = min(len(v.runs), len(base.runs))
    resolution = Resolution(
        seeds=seeds_to_resolve(spread.sd if spread else None, s.margin, s.ci_level),
        prompts=prompts_to_resolve(spread.sd if spread else None, share, seeds,
                                   noise.eval_prompts if noise is not None else None, s.margin, s.ci_level),
        eval_share=share)
    found = verdict(d_a, d_b, sweep.d_b_free(v, base), s.margin, row.margin_B,
                    not (v.unidentified or base.unidentified), resolution)
    row.verdict, row.reason, row.needs = found.verdict, found.reason, found.needs


def _set_interval(row: ComparisonRow, d: Difference, which: str) -> None:
    setattr(row, which, d.value)
    setattr(row, f"{which}_lo", d.lo)
    setattr(row, f"{which}_hi", d.hi)
    row.interval_source = d.source


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf
