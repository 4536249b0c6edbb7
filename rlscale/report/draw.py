"""Draw and encode every figure of a report: the sweeps are split over worker processes (each with its
own reusable panel figure), the figure across sweeps is drawn here, and each figure is encoded once per
wanted target (the page's PNG, the files' format)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import matplotlib

from rlscale.fit.results import FitSettings
from rlscale.report.figures import NamedFigure, RunPanels, extrapolation_figure, sweep_figures
from rlscale.report.content import ReportData, SweepView
from rlscale.report.parallel_figure import parallel_figure
from rlscale.report.plotting import STYLE, render
from rlscale.report.pool import parallel_map

# (format, dpi) of one encoding
Target = Tuple[str, int]


@dataclass
class Encoded:
    """One figure, encoded for each target."""

    sweep: str
    kind: str
    data: Dict[Target, bytes]


@dataclass
class _Batch:
    settings: FitSettings
    sweeps: List[SweepView]
    most_runs: int
    targets: Sequence[Target]
    logx: bool


def draw_report(report: ReportData, targets: Sequence[Target], logx: bool = False,
                n_workers: int = 1) -> List[Encoded]:
    """Every figure: per sweep (curves, run panels, LOO, diagnostics), then each sweep's parallel curves of
    several metrics, then extrapolation."""
    most_runs = max((len(s.runs) for s in report.sweeps), default=1)
    batches = [_Batch(report.settings, sweeps, most_runs, targets, logx)
               for sweeps in _split(report.sweeps, n_workers)]
    encoded = [e for batch in parallel_map(_draw_batch, batches, n_workers) for e in batch]
    with matplotlib.rc_context(STYLE):
        for sweep, view in report.parallel.items():
            encoded.append(_encode(NamedFigure(sweep, "parallel", parallel_figure(view, report.settings, logx)),
                                   targets))
        extrapolation = extrapolation_figure(report)
        if extrapolation is not None:
            encoded.append(_encode(NamedFigure("", "extrapolation", extrapolation), targets))
    return encoded


def _draw_batch(batch: _Batch) -> List[Encoded]:
    with matplotlib.rc_context(STYLE):
        panels = RunPanels(batch.settings, batch.logx, batch.most_runs)
        return [_encode(named, batch.targets) for sweep in batch.sweeps
                for named in sweep_figures(sweep, batch.settings, panels, batch.logx)]


def _encode(named: NamedFigure, targets: Sequence[Target]) -> Encoded:
    return Encoded(named.sweep, named.kind,
                   {(fmt, dpi): render(named.figure, fmt, dpi, named.keep_top) for fmt, dpi in targets})


def _split(sweeps: List[SweepView], n: int) -> List[List[SweepView]]:
    """Consecutive groups of sweeps with about equal numbers of runs (the cost of drawing)."""
    n = max(1, min(n, len(sweeps)))
    total = sum(len(s.runs) for s in sweeps)
    groups: List[List[SweepView]] = [[]]
    done = 0
    for sweep in sweeps:
        if groups[-1] and len(groups) < n and done >= total * len(groups) / n:
            groups.append([])
        groups[-1].append(sweep)
        done += len(sweep.runs)
    return groups
