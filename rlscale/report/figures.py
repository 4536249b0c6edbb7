"""The report's figures: a few per sweep, whatever its number of runs.

Per sweep: ``curves`` (every run's eval points and fitted Eq. 1 sigmoid of ScaleRL, arXiv 2510.13786,
overlaid: solid over the fit, dashed beyond fit_until, A dotted, the cutoff dash-dot), ``runs`` (one small
panel per run, 24 to a page: the same plus A's CI band, points outside the fit window hollow, the power
law of App. A.4 in grey, or a failed fit's message), ``loo`` (Figure 7: F(R_C) vs C on log-log axes at the
sweep's fixed average A, slope B; rlscale.report.figure7) and ``diagnostics`` (truncation rate with the paper's
10 % instability line, entropy, kept-prompt fraction, off-policy lag, throughput over compute). Across sweeps:
``extrapolation`` (predicted vs observed reward beyond fit_until, sigmoid vs power law).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, List, Optional

import numpy as np
from matplotlib.figure import Figure

from rlscale.fit.results import FitSettings
from rlscale.report.figure7 import Y_LABEL, figure7
from rlscale.report.content import TRUNCATION_FLAG, ReportData, RunView, SweepView
from rlscale.report.plotting import (BAD, MARGINS, finish, fitted_curve, legend_text, panel_figure,
                                     points, power_law_curve, run_colors, set_scales, shorten, text_color, thin,
                                     unit)

# (title, train metrics drawn in the panel: the first solid, a second one dotted in the same colour)
_DIAGNOSTIC_PANELS = (("truncation rate", ("truncation_rate",)), ("entropy", ("entropy",)),
                      ("kept-prompt fraction", ("kept_prompt_fraction",)),
                      ("off-policy lag (mean; max dotted)", ("lag_mean", "lag_max")),
                      ("throughput (samples/s)", ("samples_per_s",)),
                      ("throughput (tokens/s)", ("tokens_per_s",)))


@dataclass
class NamedFigure:
    """A drawn figure: ``sweep`` is "" for figures across sweeps, ``kind`` names what it shows, and
    ``keep_top`` (inches), when set, is the part of the figure to keep (a page of panels not all used)."""

    sweep: str
    kind: str
    figure: Figure
    keep_top: Optional[float] = None


def sweep_figures(sweep: SweepView, settings: FitSettings, panels: "RunPanels",
                  logx: bool) -> Iterator[NamedFigure]:
    """Draw a sweep's figures one at a time: render each before asking for the next (the per-run
    panels reuse one figure). Call inside ``matplotlib.rc_context(STYLE)``."""
    colors = run_colors(len(sweep.runs))
    yield NamedFigure(sweep.name, "curves", curves_figure(sweep, settings, colors, logx))
    yield from panels.pages(sweep, colors)
    loo = loo_figure(sweep, settings, colors)
    if loo is not None:
        yield NamedFigure(sweep.name, "loo", loo)
    diagnostics = diagnostics_figure(sweep, settings, colors, logx)
    if diagnostics is not None:
        yield NamedFigure(sweep.name, "diagnostics", diagnostics)


def curves_figure(sweep: SweepView, settings: FitSettings, colors: List[str], logx: bool) -> Figure:
    """All runs of a sweep overlaid: eval points, fitted sigmoid (dashed beyond fit_until), A dotted,
    the cutoffs dash-dot (the CI bands of A are in the per-run panels, where they do not pile up)."""
    labels = [run.name if run.fit_ok else f"{run.name} (no fit)" for run in sweep.runs]
    figure, axes = panel_figure(1, 1, 6.0, 3.4, legend=labels)
    ax = axes[0][0]
    cutoffs = set()
    for run, color, label in zip(sweep.runs, colors, labels):
        points(ax, run, color, logx, size=9)
        if not run.fit_ok:
            ax.plot([], [], color=color, marker="o", linestyle="none", label=legend_text(label))
            continue
        fit = run.fit
        fitted_curve(ax, run, color, logx, label=legend_text(label))
        ax.axhline(fit.A, color=color, linestyle=":", linewidth=0.9)
        if fit.cutoff is not None:
            cutoffs.add(fit.cutoff)
    for cutoff in sorted(cutoffs):
        ax.axvline(cutoff, color="0.45", linestyle="-.", linewidth=0.8)
    ax.set_xlabel(unit(settings.x))
    ax.set_ylabel(settings.y)
    ax.set_title(sweep.name, parse_math=False)
    finish(figure, axes, logx, legend=labels)
    return figure


class RunPanels:
    """One small panel per run, drawn a page at a time on one figure whose axes are made once and
    emptied between pages: making axes costs more than drawing a run, and a report may hold hundreds."""

    COLUMNS, ROWS = 4, 6
    PANEL_W, PANEL_H, WSPACE, HSPACE = 2.3, 1.5, 0.35, 0.45

    def __init__(self, settings: FitSettings, logx: bool, most_runs: int):
        self.logx = logx
        self.rows = min(self.ROWS, max(1, math.ceil(most_runs / self.COLUMNS)))
        self.figure, self.axes = panel_figure(self.rows, self.COLUMNS, self.PANEL_W, self.PANEL_H,
                                              self.WSPACE, self.HSPACE)
        for ax in self.axes.flat:
            ax.set_autoscale_on(False)
            set_scales(ax, logx)
        self.figure.text(0.04 / self.figure.get_figwidth(), 1 - 1.0 / self.figure.get_figheight(),
                         settings.y, rotation=90, ha="left", va="center")
        self.xlabel = self.figure.text(0.5, 0, unit(settings.x), ha="center", va="bottom")

    def pages(self, sweep: SweepView, colors: List[str]) -> Iterator[NamedFigure]:
        per_page = self.rows * self.COLUMNS
        xlim, ylim = self._limits(sweep.runs)
        for start in range(0, len(sweep.runs), per_page):
            runs = sweep.runs[start:start + per_page]
            for i, ax in enumerate(self.axes.flat):
                for artist in (*ax.lines, *ax.collections, *ax.patches, *ax.texts):
                    artist.remove()
                ax.set_visible(i < len(runs))
                ax.set_xlim(xlim)
                ax.set_ylim(ylim)
                ax.tick_params(labelleft=i % self.COLUMNS == 0, labelbottom=i + self.COLUMNS >= len(runs))
            for ax, run, color in zip(self.axes.flat, runs, colors[start:]):
                self._panel(ax, run, color)
            rows = math.ceil(len(runs) / self.COLUMNS)
            keep = MARGINS[3] + rows * self.PANEL_H + (rows - 1) * self.HSPACE + MARGINS[2]
            self.xlabel.set_y(1 - (keep - 0.04) / self.figure.get_figheight())
            page = start // per_page
            yield NamedFigure(sweep.name, f"runs-{page + 1}" if page else "runs", self.figure, keep)

    def _panel(self, ax, run: RunView, color: str) -> None:
        ax.set_title(shorten(run.name, 34), color=text_color(color), parse_math=False)
        points(ax, run, color, self.logx, size=7, window=True)
        fit = run.fit
        if run.fit_ok:
            if fit.A_lo is not None and fit.A_hi is not None:
                ax.axhspan(fit.A_lo, fit.A_hi, color=color, alpha=0.15, linewidth=0)
            ax.axhline(fit.A, color=color, linestyle=":", linewidth=0.9)
            fitted_curve(ax, run, color, self.logx)
            power_law_curve(ax, run, self.logx)
            if fit.cutoff is not None:
                ax.axvline(fit.cutoff, color="0.45", linestyle="-.", linewidth=0.8)
            note = f"A={fit.A:.3f} B={fit.B:.2f}" + (f"\n{shorten(fit.misfit, 44)}" if fit.misfit else "")
        else:
            note = shorten(run.fit_message, 44)
        ax.text(0.97, 0.04, note, transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5,
                color="0.2" if run.fit_ok else BAD, parse_math=False,
                bbox={"facecolor": "white", "alpha": 0.7, "linewidth": 0, "pad": 1})

    def _limits(self, runs: List[RunView]):
        """One scale for all panels of a sweep, covering its points, predictions and A bands."""
        xs = [x for run in runs for x in run.eval.x if x > 0 or not self.logx]
        xs += [v for run in runs if run.fit_ok for v in (run.fit.extrap_x, run.fit.fit_until) if v]
        ys = [y for run in runs for y in run.eval.y]
        ys += [v for run in runs if run.fit_ok for v in (run.fit.R0, run.fit.A_hi, run.fit.A) if v is not None]
        if not xs:
            xs = [1.0]
        if not ys:
            ys = [0.0, 1.0]
        hi = max(xs)
        lo = min(xs) / 1.3 if self.logx else 0.0
        pad = max(0.02, 0.05 * (max(ys) - min(ys)))
        return (lo, hi * (1.3 if self.logx else 1.03)), (min(ys) - pad, max(ys) + pad)


def loo_figure(sweep: SweepView, settings: FitSettings, colors: List[str]) -> Optional[Figure]:
    """Figure 7 (rlscale.report.figure7): F(R_C) vs C on log-log axes at the fixed average A of the LOO
    sweep, each variant's points and its line of slope B; the F axis spans the points' robust range."""
    plot = figure7(sweep, settings.x)
    if plot is None:
        return None
    color_of = {run.anchor: color for run, color in zip(sweep.runs, colors)}
    labels = [f"{cloud.variant}  B={cloud.B:.2f}" for cloud in plot.clouds]
    figure, axes = panel_figure(1, 1, 4.6, 3.4, legend=labels)
    ax = axes[0][0]
    lo, hi = plot.ylim
    for cloud, label in zip(plot.clouds, labels):
        color = color_of[cloud.anchor]
        shown = (cloud.log_f >= lo) & (cloud.log_f <= hi)
        ax.scatter(cloud.c[shown], 10.0 ** cloud.log_f[shown], s=8, color=color, linewidths=0)
        grid, log_f = cloud.line()
        ax.plot(grid, 10.0 ** log_f, color=color, linewidth=1.2, label=legend_text(label))
    ax.set_yscale("log")
    ax.set_ylim(10.0 ** lo, 10.0 ** hi)
    ax.set_xlabel(plot.x_label)
    ax.set_ylabel(Y_LABEL)
    hidden = f"; {plot.hidden} points off the axis" if plot.hidden else ""
    ax.set_title(f"{sweep.name}: fixed A = {plot.A_fixed:.3f}; lines of slope B{hidden}", parse_math=False)
    finish(figure, axes, True, legend=labels)
    return figure


def diagnostics_figure(sweep: SweepView, settings: FitSettings, colors: List[str],
                       logx: bool) -> Optional[Figure]:
    """Train-line diagnostics over compute, one panel per metric any run of the sweep logged."""
    panels = [(title, metrics) for title, metrics in _DIAGNOSTIC_PANELS
              if any(metrics[0] in run.train for run in sweep.runs)]
    if not panels:
        return None
    ncols = min(3, len(panels))
    figure, axes = panel_figure(math.ceil(len(panels) / ncols), ncols, 2.6, 1.5, wspace=0.6, hspace=0.6)
    for ax, (title, metrics) in zip(axes.flat, panels):
        for run, color in zip(sweep.runs, colors):
            for metric, style in zip(metrics, ("-", ":")):
                series = run.train.get(metric)
                if series is not None:
                    ax.plot(*thin(series.x, series.y), color=color, linestyle=style, linewidth=0.9)
        if metrics[0] == "truncation_rate":
            ax.axhline(TRUNCATION_FLAG, color=BAD, linestyle="--", linewidth=0.9)
            ax.text(0.02, TRUNCATION_FLAG, f"paper's instability level {TRUNCATION_FLAG:.0%}", color=BAD,
                    fontsize=6.5, va="bottom", transform=ax.get_yaxis_transform())
        ax.set_title(title)
    finish(figure, axes, logx, used=len(panels), xlabel=unit(settings.x))
    return figure


def extrapolation_figure(report: ReportData) -> Optional[Figure]:
    """Left: predicted vs observed reward beyond fit_until, both the mean over the run's last evals there
    (RunFit.extrap_evals; the margin on A shaded). Right: absolute error of the sigmoid vs the power law per
    run (above the diagonal: the power law extrapolated worse)."""
    checked = [(sweep, run) for sweep in report.sweeps for run in sweep.runs
               if run.fit is not None and run.fit.extrap_predicted is not None
               and run.fit.extrap_observed is not None]
    if not checked:
        return None
    names = list(dict.fromkeys(sweep.name for sweep, _ in checked))
    legend = names if len(names) > 1 else None
    figure, axes = panel_figure(1, 2, 3.0, 2.8, wspace=0.8, legend=legend)
    left, right = axes[0]
    errors = []
    for name, color in zip(names, run_colors(len(names))):
        fits = [run.fit for sweep, run in checked if sweep.name == name]
        left.scatter([f.extrap_observed for f in fits], [f.extrap_predicted for f in fits], s=14, color=color,
                     linewidths=0, label=legend_text(name))
        pairs = [(f.extrap_abs_err, f.power_law.extrap_abs_err) for f in fits if f.extrap_abs_err is not None
                 and f.power_law is not None and f.power_law.extrap_abs_err is not None]
        if pairs:
            right.scatter(*zip(*pairs), s=14, color=color, linewidths=0)
            errors += [e for pair in pairs for e in pair]
    values = [v for _, r in checked for v in (r.fit.extrap_observed, r.fit.extrap_predicted)]
    lo, hi = min(values) - 0.03, max(values) + 0.03
    diagonal = np.array([lo, hi])
    margin = report.settings.margin
    left.fill_between(diagonal, diagonal - margin, diagonal + margin, color="0.88", linewidth=0)
    left.plot(diagonal, diagonal, color="0.3", linewidth=0.8)
    left.set_xlim(lo, hi)
    left.set_ylim(lo, hi)
    left.set_xlabel("observed: mean of the last evals")
    left.set_ylabel("sigmoid prediction, same evals")
    left.set_title(f"predicted vs observed (shaded: \u00b1{margin:g})")
    top = max(errors, default=0.05) * 1.1
    right.plot([0, top], [0, top], color="0.3", linewidth=0.8)
    right.set_xlim(0, top)
    right.set_ylim(0, top)
    right.set_xlabel("|error| sigmoid")
    right.set_ylabel("|error| power law")
    right.set_title("extrapolation error per run")
    finish(figure, axes, False, legend=legend)
    return figure
