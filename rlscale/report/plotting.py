"""Matplotlib primitives the report's figures share: style, fixed-margin layout, colours, encoding, and
the drawing of one run's eval points, fitted sigmoid (ScaleRL Eq. 1) and App. A.4 power law.

No pyplot: figures are ``matplotlib.figure.Figure`` objects on the Agg canvas, freed when dropped.
"""
from __future__ import annotations

import io
from typing import List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import to_hex, to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from rlscale.fit.results import axis_label  # noqa: E402
from rlscale.report.curves import compute_grid, power_law, sigmoid  # noqa: E402
from rlscale.report.content import RunView  # noqa: E402

LEGEND_MAX = 24
BAD = "#b00020"
STYLE = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
         "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.grid": True, "grid.alpha": 0.3,
         "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "none",
         # A fixed title position: the automatic one measures every tick label of the row, per axes.
         "axes.titley": 1.0, "axes.titlepad": 4.0}
# Margins of every figure, in inches: left, right, bottom, top.
MARGINS = (0.75, 0.15, 0.5, 0.3)
TEXT_CONTRAST = 4.5  # WCAG AA contrast of text on white: pale colours (tab20's second shades) are darkened
_PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


def run_colors(n: int) -> List[str]:
    """One colour per run of a sweep, the same in every figure and in the page's tables."""
    if n <= 10:
        return [to_hex(c) for c in colormaps["tab10"].colors[:n]]
    if n <= 20:
        return [to_hex(c) for c in colormaps["tab20"].colors[:n]]
    cmap = colormaps["viridis"]
    return [to_hex(cmap(i / max(n - 1, 1))) for i in range(n)]


def text_color(color: str) -> str:
    """``color`` darkened (towards black, keeping its hue) until text in it has TEXT_CONTRAST on white."""
    rgb = np.array(to_rgb(color))
    for _ in range(20):
        if (1.05 / (_luminance(rgb) + 0.05)) >= TEXT_CONTRAST:
            break
        rgb = rgb * 0.9
    return to_hex(rgb)


def _luminance(rgb: np.ndarray) -> float:
    """WCAG relative luminance of an sRGB colour."""
    linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def render(figure: Figure, fmt: str = "png", dpi: int = 100, keep_top: Optional[float] = None) -> bytes:
    """Encode a figure (png, pdf or svg); ``keep_top`` crops it to its top that many inches."""
    buffer = io.BytesIO()
    extra = {"pil_kwargs": {"compress_level": 3}} if fmt == "png" else {}
    if keep_top is not None:
        width, height = figure.get_size_inches()
        extra["bbox_inches"] = Bbox.from_bounds(0, height - keep_top, width, keep_top)
    figure.savefig(buffer, format=fmt, dpi=dpi, **extra)
    return buffer.getvalue()


def panel_figure(nrows: int, ncols: int, panel_w: float, panel_h: float, wspace: float = 0.5,
                 hspace: float = 0.5, legend: Optional[List[str]] = None) -> Tuple[Figure, np.ndarray]:
    """A figure of panels with margins fixed in inches (constrained layout costs as much as drawing),
    with room on the right for a legend of ``legend`` labels when there are at most LEGEND_MAX."""
    left, right, bottom, top = MARGINS
    room = legend_width(legend)
    width = left + ncols * panel_w + (ncols - 1) * wspace + right + room
    height = bottom + nrows * panel_h + (nrows - 1) * hspace + top
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(nrows, ncols, squeeze=False, gridspec_kw={
        "left": left / width, "right": 1 - (right + room) / width, "bottom": bottom / height,
        "top": 1 - top / height, "wspace": wspace / panel_w, "hspace": hspace / panel_h})
    return figure, axes


def finish(figure: Figure, axes: np.ndarray, logx: bool, used: Optional[int] = None, xlabel: str = "",
           legend: Optional[List[str]] = None) -> None:
    """Hide unused panels, set the compute scale and sparse ticks, label x once, place the legend."""
    for ax in list(axes.flat)[used:] if used is not None else []:
        ax.set_visible(False)
    for ax in axes.flat:
        set_scales(ax, logx)
    if xlabel:
        figure.text(0.5, 0.04 / figure.get_figheight(), xlabel, ha="center", va="bottom")
    room = legend_width(legend)
    if room:
        figure.legend(loc="upper left", frameon=False, handlelength=1.6,
                      bbox_to_anchor=(1 - (room - 0.05) / figure.get_figwidth(),
                                      1 - MARGINS[3] / figure.get_figheight()))


def set_scales(ax: Axes, logx: bool) -> None:
    """Log or linear compute axis with sparse plain-text tick labels: each label costs a text, and the
    default log labels are mathtext, slower still."""
    if logx:
        ax.set_xscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(_PLAIN)
            axis.set_minor_formatter(NullFormatter())
        else:
            axis.set_major_locator(MaxNLocator(5))


def legend_width(labels: Optional[List[str]]) -> float:
    """Inches to keep for a legend of these labels (0: none, when absent or too many to read)."""
    if not labels or len(labels) > LEGEND_MAX:
        return 0.0
    return min(3.2, 0.5 + 0.055 * max(len(label) for label in labels))


def points(ax: Axes, run: RunView, color: str, logx: bool, size: float, window: bool = False) -> None:
    """The run's eval points; with ``window``, those outside [cutoff, fit_until] hollow."""
    x, y = np.asarray(run.eval.x), np.asarray(run.eval.y)
    if logx:
        x, y = x[x > 0], y[x > 0]
    if not window or not run.fit_ok:
        ax.scatter(x, y, s=size, color=color, linewidths=0)
        return
    lo = run.fit.cutoff if run.fit.cutoff is not None else -np.inf
    hi = run.fit.fit_until if run.fit.fit_until is not None else np.inf
    used = (x >= lo) & (x <= hi)
    ax.scatter(x[used], y[used], s=size, color=color, linewidths=0)
    ax.scatter(x[~used], y[~used], s=size, facecolors="none", edgecolors=color, linewidths=0.7)


def fitted_curve(ax: Axes, run: RunView, color: str, logx: bool, label: Optional[str] = None) -> None:
    """Eq. 1 with the run's parameters: solid up to fit_until, dashed beyond it."""
    fit = run.fit
    xs = curve_grid(run, logx)
    ys = sigmoid(xs, fit.A, fit.B, fit.C_mid, fit.R0)
    split = fit.fit_until if fit.fit_until is not None else xs[-1]
    inside = xs <= split
    ax.plot(xs[inside], ys[inside], color=color, linewidth=1.3, label=label)
    outside = xs >= split
    if outside.any():
        ax.plot(xs[outside], ys[outside], color=color, linewidth=1.3, linestyle="--")


def power_law_curve(ax: Axes, run: RunView, logx: bool) -> None:
    """App. A.4's power law fitted on the same window, thin grey, from the cutoff on and above R0 (it
    diverges towards C = 0)."""
    power = run.fit.power_law
    if power is None or power.status != "ok" or None in (power.A, power.D, power.B):
        return
    xs = curve_grid(run, logx)
    xs = xs[xs >= max(run.fit.cutoff or 0.0, xs[-1] * 0.02)]
    ys = power_law(xs, power.A, power.D, power.B)
    above = ys >= run.fit.R0
    ax.plot(xs[above], ys[above], color="0.55", linewidth=0.8)


def curve_grid(run: RunView, logx: bool) -> np.ndarray:
    """Abscissae from the first eval point (0 on linear axes) to the last point or prediction."""
    fit = run.fit
    ends = [v for v in [*run.eval.x, fit.fit_until, fit.extrap_x, *(p.x for p in fit.predictions)]
            if v is not None]
    end = max(ends) if ends else 2 * fit.C_mid
    positive = run.eval.x[run.eval.x > 0]
    start = (positive.min() if len(positive) else end * 1e-3) if logx else 0.0
    return compute_grid(start, end, logx)


def thin(x: np.ndarray, y: np.ndarray, n: int = 200) -> Tuple[np.ndarray, np.ndarray]:
    """At most ~n points of a long series (every k-th one, the last kept): a 10k-step run draws fast."""
    keep = np.unique(np.r_[np.arange(0, len(x), max(1, len(x) // n)), len(x) - 1])
    return x[keep], y[keep]


def unit(x: str) -> str:
    """The x axis label: says whether the unit is measured (GPU- or CPU core-hours) or counted."""
    return axis_label(x)


def legend_text(s: str) -> str:
    """User text for legends (which parse mathtext): a literal '$' stays a dollar sign."""
    return s.replace("$", r"\$")


def shorten(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"
