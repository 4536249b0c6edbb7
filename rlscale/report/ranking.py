"""The ranking table of the page and the terminal: one row per variant, its seeds folded (App. A.7: each
seed is fitted alone, a variant is compared by its seeds' mean with their spread). The rank, the tie, the
differences with their intervals and the note are the fitter's rank row (rlscale.fit.compare), shown once;
the A and B of each seed, and what a seed's fit says, come from its run.

A comparison row may carry more than the tables have columns for (what the fitter adds to explain a
difference): ``details`` lists those fields by name, so a rank or LOO row shows whatever it holds.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict, List, Optional

from rlscale.fit.family import rule_name
from rlscale.fit.results import ComparisonRow
from rlscale.report.formatting import DASH, ci, num, signed_ci
from rlscale.report.content import RunView, VariantView


# Fields of a comparison row that the tables show in their own cells, or that say which row it is.
SHOWN = frozenset({"kind", "sweep", "variant", "rank", "tie", "axis", "A", "B", "C_mid", "A_fixed", "B_fixed",
                   "dA", "dA_lo", "dA_hi", "dB", "dB_lo", "dB_hi", "interval_source", "verdict", "reason",
                   "needs", "note", "p_value", "p_adjusted", "family_size", "correction"})


@dataclass(frozen=True)
class Note:
    """One part of a row's note; ``flag``: shown as a warning (A not identified, a seed without a fit)."""

    text: str
    flag: bool = False


def rank_text(row: Optional[ComparisonRow]) -> str:
    """"2", "2=" when tied, a dash when the variant is not ranked."""
    if row is None or row.rank is None:
        return DASH
    return f"{row.rank}{'=' if row.tie else ''}"


def by_seed(variant: VariantView, parameter: str, digits: int = 3) -> str:
    """A parameter's spread: with one fitted seed its interval, with several each seed's value and their
    standard deviation ("s0 0.605, s1 0.612 (sd 0.005)")."""
    fitted = variant.fitted
    if len(fitted) == 1:
        fit = fitted[0].fit
        return ci(getattr(fit, f"{parameter}_lo"), getattr(fit, f"{parameter}_hi"), digits)
    values = ", ".join(f"{run.seed_label} {num(getattr(run.fit, parameter), digits)}".lstrip() for run in fitted)
    spread = variant.spread(parameter)
    return values + (f" (sd {num(spread, digits)})" if spread is not None else "")


def points_text(variant: VariantView) -> str:
    """Eval points per seed: one number when the seeds agree, else their range."""
    counts = sorted({run.fit.n_points if run.fit is not None else len(run.eval.x) for run in variant.runs})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}\u2013{counts[-1]}"


def notes(variant: VariantView) -> List[Note]:
    """The rank row's differences and note, then what the seeds' fits say (one note per message, naming
    its seeds when the variant has several)."""
    row = variant.row
    out = [Note(text) for text in (_differences(row), row.note if row is not None else "", details(row)) if text]
    seeds: Dict[Note, List[str]] = {}
    for run in variant.runs:
        for note in _fit_notes(run):
            seeds.setdefault(note, []).append(run.seed_label)
    several = len(variant.runs) > 1
    for note, labels in seeds.items():
        named = [label for label in labels if label]
        prefix = f"{', '.join(named)}: " if several and named and len(labels) < len(variant.runs) else ""
        out.append(Note(prefix + note.text, note.flag))
    return out


def note_text(variant: VariantView) -> str:
    """The notes as one line (the terminal's column)."""
    return "; ".join(note.text for note in notes(variant))


def details(row: Optional[ComparisonRow]) -> str:
    """The row's set fields that no cell shows (not in SHOWN), as "name value" pairs; "" when none."""
    if row is None:
        return ""
    values = ((f.name, getattr(row, f.name)) for f in fields(row) if f.name not in SHOWN)
    return ", ".join(f"{name} {_value(value)}" for name, value in values if value not in (None, "", False))


def _value(value) -> str:
    return num(value) if isinstance(value, float) else str(value)


def _differences(row: Optional[ComparisonRow]) -> str:
    """dA (and dB) to the member that placed the variant, with their interval and its source."""
    if row is None or row.dA is None:
        return ""
    text = f"\u0394A {signed_ci(row.dA, row.dA_lo, row.dA_hi)}"
    if row.dB is not None:
        text += f", \u0394B {signed_ci(row.dB, row.dB_lo, row.dB_hi, 2)}"
    return text + (f" ({row.interval_source})" if row.interval_source else "") + p_text(row)


def p_text(row: Optional[ComparisonRow]) -> str:
    """", p 0.065 alone, 0.52 after Bonferroni over 8" (rlscale.fit.family); "" without a p-value."""
    if row is None or row.p_value is None:
        return ""
    if row.correction in ("", "none") or row.p_adjusted is None:
        return f", p {row.p_value:.2g}"
    return (f", p {row.p_value:.2g} alone, {row.p_adjusted:.2g} after {rule_name(row.correction)} over "
            f"{row.family_size}")


def _fit_notes(run: RunView) -> List[Note]:
    if not run.fit_ok:
        return [Note(run.fit_message, flag=True)]
    fit = run.fit
    found = [Note(f"A not identified: {fit.A_identified_reason}", flag=True)] if fit.A_identified is False else []
    found += [Note(fit.misfit, flag=True)] if fit.misfit else []
    return found + ([Note(fit.message)] if fit.message else [])
