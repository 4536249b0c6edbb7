"""Comparing variants (App. A.7 and Section 4): seed spread, ranking by A with the margin rule, and the
leave-one-out table.

- Seeds: runs of one variant (folder name without ``_s<N>``) are fitted separately; the variant's A, B and
  C_mid are their means and the seed spread is the standard deviation of A and B (paper: 3 runs varied
  by at most +-0.015 in A, hence the +-0.02 margin).
- Ranking (per sweep folder): by A; where two adjacent variants' A are within the margin, both are refit
  with their average A and the higher B ranks first ("higher B is at least as good"), and the row says so.
- LOO (a sweep.json with a ``base`` and variants with an ``axis``): A is averaged over all runs of the
  sweep, every run is refit with that fixed A, and each reversion is compared with the base: dA = A - A_base
  (free fits), dB = B_fixed - B_fixed_base, verdict lower/higher ceiling (|dA| > margin), else lower
  efficiency (dB < 0), else within margin.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from rlscale.fit.run import refit_with_a
from rlscale.fit.schema import ComparisonRow, FitSettings, RunFit


@dataclass
class VariantFit:
    """The ok runs (seeds) of one variant of a sweep and their mean parameters."""

    sweep: str
    variant: str
    runs: List[RunFit]
    fixed_b: Dict[float, float] = field(default_factory=dict, repr=False)

    @property
    def A(self) -> float:
        return statistics.fmean(r.A for r in self.runs)

    @property
    def B(self) -> float:
        return statistics.fmean(r.B for r in self.runs)

    @property
    def C_mid(self) -> float:
        return statistics.fmean(r.C_mid for r in self.runs)

    def b_at(self, a: float, settings: FitSettings) -> float:
        """Mean B of the seeds refit with A held at ``a`` (cached per ``a``); NaN when a refit finds no
        fit (the paper method's curve_fit converging in no cell)."""
        if a not in self.fixed_b:
            try:
                self.fixed_b[a] = statistics.fmean(refit_with_a(r, a, settings).B for r in self.runs)
            except RuntimeError:
                self.fixed_b[a] = math.nan
        return self.fixed_b[a]


def compare(runs: List[RunFit], sweeps: Dict[str, dict], settings: FitSettings) -> List[ComparisonRow]:
    """Set the seed spread on ``runs`` and return the ranking and LOO rows of every sweep."""
    variants = _variants(runs)
    for v in variants:
        if len(v.runs) > 1:
            std_a, std_b = statistics.stdev(r.A for r in v.runs), statistics.stdev(r.B for r in v.runs)
            for r in v.runs:
                r.seed_std_A, r.seed_std_B = std_a, std_b
    rows: List[ComparisonRow] = []
    for sweep in sorted({r.sweep for r in runs}):
        members = [v for v in variants if v.sweep == sweep]
        failed = sorted({r.variant for r in runs if r.sweep == sweep} - {v.variant for v in members})
        rows += _ranking(sweep, members, failed, settings)
        entries = _loo_entries(sweeps.get(sweep))
        if entries:
            rows += _loo(sweep, entries, members, settings)
    return rows


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


def _ranking(sweep: str, members: List[VariantFit], failed: List[str], settings: FitSettings) -> List[ComparisonRow]:
    def tie(p: VariantFit, q: VariantFit) -> Optional[Tuple[float, float, float]]:
        """(average A, B of p, B of q) refit at the average A, when p and q are within the margin."""
        if abs(p.A - q.A) > settings.margin:
            return None
        a = (p.A + q.A) / 2
        return a, p.b_at(a, settings), q.b_at(a, settings)

    def above(p: VariantFit, q: VariantFit) -> bool:
        refit = tie(p, q)
        return p.A > q.A if refit is None else (refit[1], p.A) > (refit[2], q.A)

    order = sorted(members, key=lambda v: -v.A)
    for _ in range(len(order)):  # bubble passes with the margin rule; stops when stable
        swapped = False
        for i in range(len(order) - 1):
            if above(order[i + 1], order[i]):
                order[i], order[i + 1] = order[i + 1], order[i]
                swapped = True
        if not swapped:
            break
    rows = []
    for i, v in enumerate(order):
        row = ComparisonRow(kind="rank", sweep=sweep, variant=v.variant, rank=i + 1, A=v.A, B=v.B, C_mid=v.C_mid,
                            note=f"mean of {len(v.runs)} seeds" if len(v.runs) > 1 else "")
        neighbours = order[max(i - 1, 0):i] + order[i + 1:i + 2]
        ties = [(other, refit) for other in neighbours if (refit := tie(v, other)) is not None]
        if ties:
            row.A_fixed, row.B_fixed = ties[0][1][:2]
        row.note = "; ".join([row.note] * bool(row.note) + [
            f"A within {settings.margin:g} of {other.variant}: both refit at A={a:.3f}, B {b_self:.3g} vs {b_other:.3g}"
            for other, (a, b_self, b_other) in ties])
        rows.append(row)
    rows += [ComparisonRow(kind="rank", sweep=sweep, variant=name, note="no ok fit") for name in failed]
    return rows


def _loo(sweep: str, names: List[Tuple[str, str]], members: List[VariantFit],
         settings: FitSettings) -> List[ComparisonRow]:
    by_name = {v.variant: v for v in members}
    base_name = names[0][0]
    pooled = [r for v in members for r in v.runs]
    if not pooled:
        return [ComparisonRow(kind="loo", sweep=sweep, variant=n, axis=ax, note="no ok fit") for n, ax in names]
    a_fixed = statistics.fmean(r.A for r in pooled)
    b_fixed = {v.variant: v.b_at(a_fixed, settings) for v in members}
    base = by_name.get(base_name)
    rows = []
    for name, axis in names:
        v = by_name.get(name)
        if v is None:
            rows.append(ComparisonRow(kind="loo", sweep=sweep, variant=name, axis=axis, A_fixed=a_fixed,
                                      note="no ok fit"))
            continue
        row = ComparisonRow(kind="loo", sweep=sweep, variant=name, axis=axis, A=v.A, B=v.B, C_mid=v.C_mid,
                            A_fixed=a_fixed, B_fixed=b_fixed[name])
        if base is None:
            row.note = f"base {base_name!r} has no ok fit"
        elif name == base_name:
            row.verdict = "base"
        else:
            row.dA, row.dB = v.A - base.A, b_fixed[name] - b_fixed[base_name]
            row.verdict = _verdict(row.dA, row.dB, settings.margin)
        rows.append(row)
    return rows


def _verdict(d_a: float, d_b: float, margin: float) -> str:
    if d_a < -margin:
        return "lower ceiling"
    if d_a > margin:
        return "higher ceiling"
    return "lower efficiency" if d_b < 0 else "within margin"
