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
from rlscale.fit.misfit import misfit_note
from rlscale.fit.noise import eval_noise
from rlscale.fit.differences import Pooled
from rlscale.fit.pairing import SeedTable, Values
from rlscale.fit.ranking import tiers
from rlscale.fit.one_run import TOO_FEW_EVALS, refit_with_a
from rlscale.fit.results import (BASE, MORE_COMPUTE, MORE_EVALS, NOT_IDENTIFIED, UNRESOLVED, ComparisonRow, Difference,
                                EvalNoise, FitSettings, RunFit)
from rlscale.fit.family import NO_CORRECTION, Family, adjusted, family
from rlscale.fit.verdicts import (Decisions, Resolution, ceiling_p, ceiling_resolved, efficiency_p,
                                  efficiency_resolved, prompts_to_resolve, seeds_to_resolve, verdict)


@dataclass
class VariantFit:
    """The ok runs (seeds) of one variant of a sweep, their mean parameters and (cached) fixed-A refits."""

    sweep: str
    variant: str
    runs: List[RunFit]
    fixed: Dict[float, List[Optional[SigmoidParams]]] = field(default_factory=dict, repr=False)

    @property
    def seeds_in_a(self) -> List[RunFit]:
        """The seeds whose A enters the comparisons of A: those whose A is identified (rlscale.fit.one_run); a seed
        whose ceiling its own points do not bound would carry a number the data do not resolve into a dA."""
        return [r for r in self.runs if r.A_identified]

    @property
    def A(self) -> float:
        """The mean A of the seeds in ``seeds_in_a`` (of every seed when none is identified)."""
        return statistics.fmean(r.A for r in (self.seeds_in_a or self.runs))

    @property
    def B(self) -> float:
        return statistics.fmean(r.B for r in self.runs)

    @property
    def C_mid(self) -> float:
        return statistics.fmean(r.C_mid for r in self.runs)

    @property
    def unidentified(self) -> str:
        """Why the variant's A is not identified ("" when some seed's is): no seed has an identified A (the
        reason of the first, rlscale.fit.one_run)."""
        if self.seeds_in_a:
            return ""
        reason = self.runs[0].A_identified_reason or NOT_IDENTIFIED
        if len(self.runs) == 1:
            return reason
        return f"no seed of {len(self.runs)}: seed {self.runs[0].seed}: {reason}"

    @property
    def misfits(self) -> str:
        """What the comparisons say of the variant's seeds whose curve is not a sigmoid (rlscale.fit.misfit):
        "compared on A although seed 2's curve is not a sigmoid (...)" ("" when every seed passed)."""
        notes = [misfit_note(r) for r in self.seeds_in_a if r.misfit]
        return f"compared on A although {'; '.join(notes)}" if notes else ""

    @property
    def left_out(self) -> str:
        """The seeds left out of the comparisons of A, with why ("" when none is)."""
        out = [r for r in self.runs if not r.A_identified]
        if not out or not self.seeds_in_a:
            return ""
        seeds = ", ".join(str(r.seed) for r in out)
        return f"seed{'s' if len(out) > 1 else ''} {seeds} left out of dA (A not identified)"

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

    def by_seed(self, values: List[float], runs: Optional[List[RunFit]] = None) -> Values:
        """``values`` (one per run of ``runs``, default all) keyed by seed; a run without a seed gets a key no
        other variant shares."""
        runs = self.runs if runs is None else runs
        return {(r.seed if r.seed is not None else (self.variant, i)): v for i, (r, v) in enumerate(zip(runs, values))}

    def a_values(self) -> Values:
        """The A of the seeds in ``seeds_in_a``, keyed by seed."""
        return self.by_seed([r.A for r in self.seeds_in_a], self.seeds_in_a)


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
            values = {v.variant: v.a_values() if a is None and not free_b else
                      v.by_seed([r.B for r in v.runs] if free_b else v.b_values(a, self.settings))
                      for v in self.identified}
            self.tables[key] = SeedTable.of(values, self.settings.paired)
        return self.tables[key]

    def d_a(self, p: VariantFit, q: VariantFit) -> Difference:
        return self._difference(self.table(), p, q, p.a_values(), q.a_values())

    def d_b(self, p: VariantFit, q: VariantFit, a: float) -> Optional[Difference]:
        bp, bq = p.b_values(a, self.settings), q.b_values(a, self.settings)
        if not all(math.isfinite(b) for b in bp + bq):
            return None
        return self._difference(self.table(a), p, q, p.by_seed(bp), q.by_seed(bq))

    def d_b_free(self, p: VariantFit, q: VariantFit) -> Difference:
        """dB of the free fits (each variant at its own A)."""
        return self._difference(self.table(free_b=True), p, q, p.by_seed([r.B for r in p.runs]),
                                q.by_seed([r.B for r in q.runs]))

    def _difference(self, table: SeedTable, p: VariantFit, q: VariantFit, vp: Values, vq: Values) -> Difference:
        """p - q from ``table``; a variant outside the table (A not identified) brings its own values and
        borrows the table's spread."""
        if p.variant in table.values and q.variant in table.values:
            return table.difference(p.variant, q.variant, self.settings.ci_level)
        values = {**table.values, p.variant: vp, q.variant: vq}
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
    fam = ranking_family(len(sweep.identified), s)
    level = 1 - fam.per_test
    a_tiers = tiers(sweep.identified, lambda v: v.A, lambda v: v.variant,
                    lambda top, v: ceiling_resolved(sweep.d_a(top, v), s.margin, level))
    rank = 0
    for t, a_tier in enumerate(a_tiers):
        a = statistics.fmean(v.A for v in a_tier)
        b_tiers = [a_tier]
        if len(a_tier) > 1:
            b_tiers = tiers(a_tier, lambda v: _finite(v.b_at(a, s)), lambda v: v.variant,
                            lambda top, v: efficiency_resolved(sweep.d_b(top, v, a), sweep.d_b_free(top, v), level))
        for u, b_tier in enumerate(b_tiers):
            rank += 1
            for v in b_tier:
                rows.append(_rank_row(name, sweep, v, rank, a_tiers, t, b_tiers, u, a, fam))
    for v in sweep.members:
        if v.unidentified:
            rows.append(ComparisonRow(kind="rank", sweep=name, variant=v.variant, A=v.A, B=v.B, C_mid=v.C_mid,
                                      reason=NOT_IDENTIFIED, needs=_needs(MORE_COMPUTE, v),
                                      note=f"not ranked: {v.unidentified}"))
    rows += [ComparisonRow(kind="rank", sweep=name, variant=n, note="no ok fit") for n in failed]
    return rows


def ranking_family(n: int, settings: FitSettings) -> Family:
    """The comparisons a ranking of ``n`` variants makes: each variant below the first of its A tier once in
    A, and at most once more in B inside its A tier: 2 (n - 1), Bonferroni (rlscale.fit.family)."""
    return family("each ranked variant against the first of its tier, in A and in B", 2 * max(n - 1, 0),
                  settings.ci_level, settings.correction, fixed=False)


def _rank_row(name: str, sweep: Sweep, v: VariantFit, rank: int, a_tiers: List[List[VariantFit]], t: int,
              b_tiers: List[List[VariantFit]], u: int, a: float, fam: Family) -> ComparisonRow:
    """The ranking row of ``v`` (A tier ``t``, B tier ``u`` of it), its note about itself only."""
    s = sweep.settings
    a_tier, b_tier = a_tiers[t], b_tiers[u]
    row = ComparisonRow(kind="rank", sweep=name, variant=v.variant, rank=rank, A=v.A, B=v.B, C_mid=v.C_mid,
                        tie=len(b_tier) > 1, family_size=fam.size, correction=fam.method)
    notes = [f"{len(v.seeds_in_a)} seeds"] if len(v.seeds_in_a) > 1 else ["one seed"]
    notes += [n for n in (v.left_out, v.misfits) if n]
    reference = a_tier[0] if v is not a_tier[0] else (a_tiers[t - 1][0] if t else None)
    if reference is not None:
        d_a = sweep.d_a(v, reference)
        _set_interval(row, d_a, "dA")
        _set_p(row, ceiling_p(d_a, s.margin), fam)
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
    pooled = [r for v in sweep.identified for r in v.seeds_in_a]
    if not pooled:
        return [ComparisonRow(kind="loo", sweep=name, variant=n, axis=ax, A=by_name[n].A, B=by_name[n].B,
                              C_mid=by_name[n].C_mid, verdict=UNRESOLVED, reason=NOT_IDENTIFIED,
                              needs=_needs(MORE_COMPUTE, by_name[n]), note="no run of the sweep has an identified A")
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
        row.note = v.unidentified or "; ".join(n for n in (v.left_out, v.misfits) if n)
        if base is None:
            row.note = f"base {base_name!r} has no ok fit"
        elif variant == base_name:
            row.verdict = BASE
        rows.append(row)
    if base is not None:
        _loo_verdicts([(row, by_name[row.variant]) for row in rows if row.variant in by_name
                       and row.variant != base_name], sweep, base, a_fixed, noise)
    return rows


def table_family(rows: List[ComparisonRow], settings: FitSettings) -> str:
    """The family line of one table's rows (all of one kind, "rank" or "loo"): what it compares, how many
    comparisons, the correction and the level left to each; "" when the table made no comparison."""
    sizes = [r.family_size for r in rows if r.family_size]
    if not sizes:
        return ""
    if rows[0].kind == "loo":
        return loo_family(sizes[0] // 2, settings).describe()
    return ranking_family(sizes[0] // 2 + 1, settings).describe()


def loo_family(axes: int, settings: FitSettings) -> Family:
    """The comparisons of a LOO table: each of ``axes`` reversions against the base, in A (ceiling) and in B
    at the fixed A (efficiency): Holm over 2 x axes (rlscale.fit.family)."""
    return family(f"{axes} reverted axes against the base, each in ceiling and in efficiency", 2 * axes,
                  settings.ci_level, settings.correction, fixed=True)


@dataclass
class _LooTest:
    """One reversion's differences against the base and the p-values of its two findings (None: not tested,
    a variant or the base without an identified A)."""

    row: ComparisonRow
    v: VariantFit
    d_a: Difference
    d_b: Optional[Difference]
    d_b_free: Optional[Difference]
    p_ceiling: Optional[float]
    p_efficiency: Optional[float]


def _loo_verdicts(pairs: List[Tuple[ComparisonRow, VariantFit]], sweep: Sweep, base: VariantFit, a_fixed: float,
                  noise: Optional[EvalNoise]) -> None:
    """Every reversion's verdict, its two findings judged over the table's family (Holm by default)."""
    s = sweep.settings
    tests = []
    for row, v in pairs:
        d_a, d_b, d_b_free = sweep.d_a(v, base), sweep.d_b(v, base, a_fixed), sweep.d_b_free(v, base)
        tested = not (v.unidentified or base.unidentified) and d_a.has_interval
        tests.append(_LooTest(row, v, d_a, d_b, d_b_free,
                              ceiling_p(d_a, s.margin) if tested else None,
                              (efficiency_p(d_b, d_b_free) if abs(d_a.value) <= s.margin else 1.0) if tested else None))
    fam = loo_family(sum(t.p_ceiling is not None for t in tests), s)
    adjusted_p = adjusted([p for t in tests for p in (t.p_ceiling, t.p_efficiency)], fam)
    for i, t in enumerate(tests):
        adj_c, adj_e = adjusted_p[2 * i], adjusted_p[2 * i + 1]
        decisions = Decisions()
        if adj_c is not None and adj_e is not None:
            p, p_adj = min((t.p_ceiling, adj_c), (t.p_efficiency, adj_e), key=lambda pair: pair[1])
            decisions = Decisions(ceiling=adj_c <= fam.alpha,
                                  efficiency=adj_e <= fam.alpha, p=p, p_adjusted=p_adj, size=fam.size,
                                  method=fam.method, alpha=fam.alpha,
                                  within_level=None if fam.method == NO_CORRECTION else 1 - fam.per_test)
            t.row.p_value, t.row.p_adjusted = p, p_adj
        t.row.family_size, t.row.correction = fam.size, fam.method
        _loo_verdict(t, sweep, base, a_fixed, noise, decisions, fam)


def _loo_verdict(t: _LooTest, sweep: Sweep, base: VariantFit, a_fixed: float, noise: Optional[EvalNoise],
                 decisions: Decisions, fam: Family) -> None:
    """dA, dB, the band on dB, the eval-noise share and the verdict of reversion ``t.v`` against ``base``; the
    seeds and prompts that would resolve it are those at the level the family leaves to one comparison."""
    s, row, v = sweep.settings, t.row, t.v
    _set_interval(row, t.d_a, "dA")
    if t.d_b is not None:
        _set_interval(row, t.d_b, "dB")
    base_b = base.b_at(a_fixed, s)
    row.margin_B = s.margin_b * abs(base_b) if math.isfinite(base_b) else None
    if base.unidentified and not v.unidentified:
        row.note = f"base: {base.unidentified}"
    elif base.left_out and not v.unidentified:
        row.note = "; ".join(n for n in (row.note, f"base: {base.left_out}") if n)
    spread = sweep.spread_a(v, base)
    share = noise.share if noise is not None else None
    row.eval_share = share
    seeds = min(len(v.seeds_in_a), len(base.seeds_in_a)) or 1
    level = 1 - fam.per_test if fam.method != NO_CORRECTION else s.ci_level
    sampling = noise.sampling if noise is not None else None
    resolution = Resolution(
        seeds=seeds_to_resolve(spread.sd if spread else None, s.margin, level),
        prompts=prompts_to_resolve(spread.sd if spread else None,
                                   share * (1.0 if sampling is None else sampling) if share is not None else None,
                                   seeds, noise.eval_prompts if noise is not None else None, s.margin, level),
        eval_share=share, sampling=sampling)
    found = verdict(t.d_a, t.d_b, t.d_b_free, s.margin, row.margin_B, not (v.unidentified or base.unidentified),
                    resolution, decisions)
    row.verdict, row.reason, row.needs = found.verdict, found.reason, _needs(found.needs, v, base)


def _needs(needs: str, *variants: VariantFit) -> str:
    """What resolves a row: more evals per run (or more compute) where a variant's A is not identified because
    its runs have too few fitted evals, else ``needs`` as the verdict gave it."""
    if needs == MORE_COMPUTE and any(TOO_FEW_EVALS in v.unidentified for v in variants):
        return MORE_EVALS
    return needs


def _set_p(row: ComparisonRow, p: float, fam: Family) -> None:
    """A ranking row's p-value and its Bonferroni adjustment."""
    row.p_value = p
    row.p_adjusted = adjusted([p], fam)[0]


def _set_interval(row: ComparisonRow, d: Difference, which: str) -> None:
    """``which`` (dA, then dB) of ``row`` from ``d``; where dB's interval comes from other seeds than dA's (a
    seed whose A is not identified has a B at the common A), ``interval_source`` names both."""
    setattr(row, which, d.value)
    setattr(row, f"{which}_lo", d.lo)
    setattr(row, f"{which}_hi", d.hi)
    if which == "dB" and row.interval_source and row.interval_source != d.source:
        row.interval_source = f"dA {row.interval_source}, dB {d.source}"
    else:
        row.interval_source = d.source


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf
