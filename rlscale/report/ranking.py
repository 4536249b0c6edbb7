"""The ranking table of the page and the terminal: one row per variant, its seeds folded (App. A.7: each
seed is fitted alone, a variant is compared by its seeds' mean with their spread). The rank, the tie, the
differences with their intervals and the note are the fitter's rank row (rlscale.fit.compare), shown once;
the A and B of each seed, and what a seed's fit says, come from its run.

A comparison row may carry more than the tables have columns for (what the fitter adds to explain a
difference): ``details`` lists those fields by name, so a rank or LOO row shows whatever it holds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Dict, List, Optional

from rlscale.fit.family import rule_name
from rlscale.fit.results import ComparisonRow
from rlscale.report.formatting import DASH, ci, num, signed_ci
from rlscale.report.content import RunView, VariantView


# Fields of a comparison row that the tables show in their own cells, or that say which row it is.
SHOWN = frozenset({"kind", "sweep", "variant", "rank", "tie", "axis", "A", "B", "C_mid", "A_fixed", "B_fixed",
                   "dA", "dA_lo", "dA_hi", "dB", "dB_lo", "dB_hi", "interval_source", "verdict", "reason",
                   "needs", "note", "p_value", "p_adjusted", "family_size", "correction"})


MAX_NOTE_LINES = 3  # a row's note: the differences, the fitter's reason for the rank, what the seeds' fits say

# A module named in parentheses ("(x2.3; rlscale.fit.pooled)", "(rlscale.fit.binning)"): the run record keeps it.
_MODULE_AT_END = re.compile(r"\s*\((?:[^()]*;\s*)?rlscale\.[a-z_.]+\)")


@dataclass(frozen=True)
class Note:
    """One line of a row's note; ``flag``: shown as a warning (A not identified, a seed without a fit);
    ``detail``: the full text behind it (the page's tooltip)."""

    text: str
    flag: bool = False
    detail: str = ""


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
    """At most MAX_NOTE_LINES lines: the rank row's differences, the fitter's note (the row's other fields in
    the first line's detail), and one short reason per seed whose fit has something to say, seeds that share
    a reason on one line ("s1: A not identified: ...", no seed named when all share it); every seed's full
    messages are that line's detail."""
    row = variant.row
    out = [Note(text) for text in (_differences(row), row.note if row is not None else "") if text]
    if details(row):
        out = [replace(out[0], detail=details(row))] + out[1:] if out else [Note(details(row))]
    by_reason: Dict[Note, List[RunView]] = {}
    for run in variant.runs:
        reason = seed_reason(run)
        if reason is not None:
            by_reason.setdefault(reason, []).append(run)
    if by_reason:
        several = len(variant.runs) > 1
        parts = [(f"{', '.join(run.seed_label or run.name for run in runs)}: "
                  if several and len(runs) < len(variant.runs) else "") + reason.text
                 for reason, runs in by_reason.items()]
        full = "; ".join(f"{run.seed_label or run.name}: {message}" if several else message
                         for run in variant.runs if (message := _full_message(run)))
        out.append(Note("; ".join(parts), any(reason.flag for reason in by_reason), full))
    return out[:MAX_NOTE_LINES]


def seed_reason(run: RunView) -> Optional[Note]:
    """The one thing a seed's fit says first, in short: no usable fit, A not identified, a curve that is not a
    sigmoid, else its first note; None when the fit has nothing to say."""
    if not run.fit_ok:
        return Note(plain(run.fit_message).split("; ")[0], flag=True)
    fit = run.fit
    if fit.A_identified is False:
        return Note(f"A not identified: {plain(fit.A_identified_reason)}", flag=True)
    if fit.misfit:
        return Note(f"not a sigmoid: {plain(fit.misfit)}", flag=True)
    return Note(plain(fit.message).split("; ")[0]) if fit.message else None


def plain(text: str) -> str:
    """A fit message without the module it names ("...pooled level (x2.3; rlscale.fit.pooled)" -> "...pooled
    level")."""
    return _MODULE_AT_END.sub("", text or "").strip()


def _full_message(run: RunView) -> str:
    """Everything a seed's fit says, as the run record shows it."""
    if not run.fit_ok:
        return run.fit_message
    fit = run.fit
    parts = [f"A not identified: {fit.A_identified_reason}" if fit.A_identified is False else "", fit.misfit or "",
             fit.message]
    return "; ".join(part for part in parts if part)


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
