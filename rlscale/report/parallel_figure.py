"""The parallel-curves figure of a sweep fitted on several metrics (rlscale.report.parallel): one panel per run,
each metric's eval points and its own Eq. 1 fit (ScaleRL, arXiv 2510.13786) in the metric's colour."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from rlscale.fit.results import FitSettings, RunFit
from rlscale.report.curves import compute_grid, sigmoid
from rlscale.report.parallel import ParallelSweep
from rlscale.report.plotting import finish, legend_text, panel_figure, run_colors, shorten, unit

COLUMNS, MAX_PANELS = 4, 24
PANEL_W, PANEL_H = 2.3, 1.5


def parallel_figure(view: ParallelSweep, settings: FitSettings, logx: bool) -> Figure:
    """The first ``MAX_PANELS`` runs of the sweep (the page's table lists them all)."""
    runs = view.runs[:MAX_PANELS]
    columns = min(COLUMNS, len(runs))
    figure, axes = panel_figure(math.ceil(len(runs) / columns), columns, PANEL_W, PANEL_H, 0.35, 0.45,
                                legend=[legend_text(m) for m in view.metrics])
    colors = run_colors(len(view.metrics))
    for ax, run in zip(axes.flat, runs):
        ax.set_title(shorten(run.name, 34), parse_math=False)
        for metric, color in zip(view.metrics, colors):
            _metric(ax, run.fits.get(metric), color, logx, legend_text(metric) if ax is axes.flat[0] else None)
    finish(figure, axes, logx, used=len(runs), xlabel=unit(settings.x),
           legend=[legend_text(m) for m in view.metrics])
    return figure


def _metric(ax, fit: Optional[RunFit], color: str, logx: bool, label: Optional[str]) -> None:
    """One metric of one run: its eval points, and its fitted sigmoid where the fit has parameters."""
    if fit is None:
        return
    x, y = np.asarray(fit.points_x, dtype=float), np.asarray(fit.points_y, dtype=float)
    if logx:
        x, y = x[x > 0], y[x > 0]
    ax.scatter(x, y, s=7, color=color, linewidths=0, label=label)
    if fit.fitted and None not in (fit.A, fit.B, fit.C_mid, fit.R0) and len(x):
        xs = compute_grid(max(x.min(), 1e-12) if logx else 0.0, x.max(), logx)
        ax.plot(xs, sigmoid(xs, fit.A, fit.B, fit.C_mid, fit.R0), color=color, linewidth=1.2)
