"""The report's headline numbers per sweep: runs by state, fits that worked, best variant by A and by B,
runs whose A is not identified, the median eval SE and the eval-noise flag.

A (the asymptote) and B (the efficiency exponent) are Eq. 1's parameters (ScaleRL, arXiv 2510.13786);
the paper compares recipes by A first, and by B when their A fall within the 0.02 margin (App. A.6).
A run whose A is not identified (at the edge of its range, or ending before its curve bends) is never
the "highest A".
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional

from rlscale.fit.noise import eval_noise
from rlscale.fit.results import EvalNoise
from rlscale.report.content import ReportData, RunView, SweepView
from rlscale.runfolder.metrics import is_finite_number


@dataclass(frozen=True)
class Best:
    """The run holding the highest value of one parameter."""

    name: str
    value: float


@dataclass(frozen=True)
class SweepSummary:
    name: str
    n_runs: int
    n_planned: Optional[int]
    n_fit_ok: int
    states: Dict[str, int]
    best_A: Optional[Best]
    best_B: Optional[Best]
    n_truncation_flagged: int
    n_unidentified: int = 0
    noise: Optional[EvalNoise] = None
    eval_se: Optional[float] = None  # the median of the fitted runs' eval SE (``<y>_se`` in their eval lines)

    @property
    def eval_se_text(self) -> str:
        """The median eval SE, or in words why there is none."""
        if self.eval_se is not None:
            return f"{self.eval_se:.4f}"
        return "no fitted run" if not self.n_fit_ok else "not logged"

    @property
    def no_best_A(self) -> str:
        """Why there is no highest A (no fitted run, or none whose A is identified)."""
        return "no fitted run" if not self.n_fit_ok else "no A identified"


def summarize(report: ReportData) -> List[SweepSummary]:
    return [_summarize(sweep, report.settings.margin) for sweep in report.sweeps]


def _summarize(sweep: SweepView, margin: float) -> SweepSummary:
    fitted = [run for run in sweep.runs if run.fit_ok]
    identified = [run for run in fitted if run.fit.A_identified is not False]
    return SweepSummary(
        name=sweep.name,
        n_runs=len(sweep.runs),
        n_planned=sweep.planned,
        n_fit_ok=len(fitted),
        states=dict(sorted(Counter(run.state for run in sweep.runs).items())),
        best_A=_best(identified, "A"),
        best_B=_best(fitted, "B"),
        n_truncation_flagged=sum(run.truncation_flagged for run in sweep.runs),
        n_unidentified=len(fitted) - len(identified),
        noise=eval_noise([run.fit for run in fitted], sweep.name, margin),
        eval_se=_median([run.fit.eval_se for run in fitted if is_finite_number(run.fit.eval_se)]),
    )


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _best(runs: List[RunView], parameter: str) -> Optional[Best]:
    if not runs:
        return None
    top = max(runs, key=lambda run: getattr(run.fit, parameter))
    return Best(top.name, getattr(top.fit, parameter))
