"""Write the report's outputs from one drawing of each figure: the HTML page (PNG inline) and/or a
folder of figure files for papers (png, pdf or svg)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from rlscale.report.draw import draw_report
from rlscale.report.content import ReportData
from rlscale.report.page import render_page
from rlscale.report.formatting import FORMATS
from rlscale.report.plotting import run_colors
from rlscale.runfolder import atomic_write_text

PAGE = ("png", 100)
FILE_DPI = 200


@dataclass
class Written:
    html: Optional[Path] = None
    figures: List[Path] = field(default_factory=list)


def write_report(report: ReportData, html: Optional[Path] = None, figures: Optional[Path] = None,
                 fmt: str = "png", logx: bool = False, n_workers: int = 1) -> Written:
    """Write the page to ``html`` and each figure to ``figures``/<sweep>-<kind>.<fmt> (either may be
    None), drawing in ``n_workers`` processes."""
    if fmt not in FORMATS:
        raise ValueError(f"figure format {fmt!r} is not one of {', '.join(FORMATS)}")
    written = Written()
    targets = ([PAGE] if html is not None else []) + ([(fmt, FILE_DPI)] if figures is not None else [])
    if not targets:
        return written
    drawn = draw_report(report, targets, logx, n_workers)
    if figures is not None:
        figures.mkdir(parents=True, exist_ok=True)
        for figure in drawn:
            path = figures / f"{_slug(figure.sweep) + '-' if figure.sweep else ''}{figure.kind}.{fmt}"
            path.write_bytes(figure.data[(fmt, FILE_DPI)])
            written.figures.append(path)
    if html is not None:
        images = {(figure.sweep, figure.kind): figure.data[PAGE] for figure in drawn}
        colors = {run.anchor: color for sweep in report.sweeps
                  for run, color in zip(sweep.runs, run_colors(len(sweep.runs)))}
        atomic_write_text(html, render_page(report, images, colors, logx).encode("utf-8", "backslashreplace")
                          .decode("utf-8"))  # a lone surrogate left in a sample or config: escaped, never fatal
        written.html = html
    return written


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("_") or "sweep"
