"""The extrapolation check of ``rlscale fit --fit-until C|P%`` as the report's table and summary line show it.

Each run is fitted up to ``fit_until``; its curve is then checked against the mean of the last evals beyond
it (three, fewer when the run has fewer: RunFit.extrap_evals), the prediction averaged over the same evals
(rlscale.fit.one_run). The App. A.4 power law R = A - D/C^B fitted on the same window is checked the same way
(PowerLawFit.extrap_abs_err), so the sigmoid's stability shows next to it (the paper's power law drifted to
A = 1.0 on one window). Each row also shows the run's prediction interval of the observed mean, the error
of carrying its last fitted evals forward and the best of the three methods, "within noise" where the held-out
evals' noise does not separate the two best (rlscale.fit.forecast). The page and the terminal list one row per
run that has a check, then the runs without one with their reason, one line: the median and max error over the
checked runs, and per sweep one line: the interval's coverage, each method's median error and the best.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from rlscale.fit.forecast import ForecastSummary, best_text, summarize
from rlscale.report.formatting import num
from rlscale.report.content import ReportData, RunView


@dataclass(frozen=True)
class CheckedRun:
    """One run's check: observed mean of its last ``evals`` evals beyond ``fit_until`` (the last at
    ``last_x``), the sigmoid's prediction averaged over them, both errors (power law: None when it has none,
    with ``power_law_note`` saying why); the prediction interval [``lo``, ``hi``], the carry-forward
    baseline's error and the best method as printed (rlscale.fit.forecast; None/"" in fits.json without
    them)."""

    sweep: str
    run: RunView
    fit_until: Optional[float]
    evals: int
    last_x: Optional[float]
    observed: float
    predicted: float
    error: float
    power_law_error: Optional[float]
    power_law_note: str = ""
    lo: Optional[float] = None
    hi: Optional[float] = None
    carry_forward_error: Optional[float] = None
    best: str = ""


@dataclass(frozen=True)
class ErrorStats:
    """The median and the largest of one form's errors over ``n`` runs (``worst``: the run holding it)."""

    n: int
    median: float
    max: float
    worst: str

    @classmethod
    def of(cls, pairs: List[Tuple[str, float]]) -> Optional["ErrorStats"]:
        if not pairs:
            return None
        worst, top = max(pairs, key=lambda pair: pair[1])
        return cls(len(pairs), statistics.median(e for _, e in pairs), top, worst)


@dataclass(frozen=True)
class ExtrapolationSummary:
    """The line under the table: the sigmoid's errors, the power law's, how many evals each observation
    averages (``evals``: the range over runs), and how many runs fall within ``margin`` (the margin on A)."""

    sigmoid: ErrorStats
    power_law: Optional[ErrorStats]
    evals: Tuple[int, int]
    margin: float
    within_margin: int

    def describe(self) -> str:
        lo, hi = self.evals
        target = ("the last eval" if hi == 1 else f"the mean of the last {hi} evals" if lo == hi
                  else f"the mean of the last {lo}-{hi} evals")
        s = self.sigmoid
        text = (f"|error| of the sigmoid over {s.n} run{'s' if s.n != 1 else ''}, against {target} beyond "
                f"fit_until: median {num(s.median)}, max {num(s.max)} ({s.worst}); {self.within_margin} of {s.n} "
                f"within {self.margin:g}")
        p = self.power_law
        if p is not None:
            text += f". Power law: median {num(p.median)}, max {num(p.max)}"
            if p.n != s.n:
                text += f" over {p.n} runs"
        return text


@dataclass(frozen=True)
class ExtrapolationCheck:
    """The rows of the table, the runs without a check (with the reason), the summary line (None when no run
    has a check), whether the fits asked for a check at all (``--fit-until``), and per sweep the summary of the
    prediction intervals and the three methods (rlscale.fit.forecast.ForecastSummary)."""

    rows: List[CheckedRun]
    unchecked: List[Tuple[str, RunView, str]]
    summary: Optional[ExtrapolationSummary]
    requested: bool
    forecasts: List[Tuple[str, ForecastSummary]] = field(default_factory=list)


def extrapolation_check(report: ReportData) -> ExtrapolationCheck:
    """What the report's extrapolation table shows (module docstring)."""
    s = report.settings
    requested = (s.fit_until is not None or s.fit_until_frac is not None
                 or any(run.fit is not None and run.fit.fit_until is not None for run in report.runs))
    rows: List[CheckedRun] = []
    unchecked: List[Tuple[str, RunView, str]] = []
    forecasts: List[Tuple[str, ForecastSummary]] = []
    for sweep in report.sweeps:
        summary = summarize([run.fit for run in sweep.runs if run.fit is not None and run.fit_ok], s.ci_level)
        if summary is not None:
            forecasts.append((sweep.name, summary))
        for run in sweep.runs:
            checked = _checked(sweep.name, run)
            if checked is not None:
                rows.append(checked)
            else:
                unchecked.append((sweep.name, run, _why_unchecked(run)))
    return ExtrapolationCheck(rows, unchecked if requested else [], _summary(rows, s.margin), requested, forecasts)


def _checked(sweep: str, run: RunView) -> Optional[CheckedRun]:
    f = run.fit
    if f is None or None in (f.extrap_observed, f.extrap_predicted):
        return None
    law = f.power_law
    law_error = law.extrap_abs_err if law is not None else None
    note = "" if law_error is not None else (law.message or law.status) if law is not None else "not fitted"
    error = f.extrap_abs_err if f.extrap_abs_err is not None else abs(f.extrap_predicted - f.extrap_observed)
    # fits.json written before the mean over the last evals compared the last eval alone
    return CheckedRun(sweep, run, f.fit_until, f.extrap_evals or 1, f.extrap_x, f.extrap_observed, f.extrap_predicted,
                      error, law_error, note, f.extrap_lo, f.extrap_hi, f.extrap_cf_abs_err, best_text(f))


def _why_unchecked(run: RunView) -> str:
    if not run.fit_ok:
        return run.fit_message
    if run.fit.fit_until is None:
        return "fitted without fit_until"
    return "no eval beyond fit_until"


def _summary(rows: List[CheckedRun], margin: float) -> Optional[ExtrapolationSummary]:
    several = len({row.sweep for row in rows}) > 1
    names = [f"{row.sweep}/{row.run.name}" if several else row.run.name for row in rows]
    sigmoid = ErrorStats.of([(name, row.error) for name, row in zip(names, rows)])
    if sigmoid is None:
        return None
    power_law = ErrorStats.of([(name, row.power_law_error) for name, row in zip(names, rows)
                               if row.power_law_error is not None])
    evals = [row.evals for row in rows]
    return ExtrapolationSummary(sigmoid, power_law, (min(evals), max(evals)), margin,
                                sum(row.error <= margin for row in rows))
