"""The self-contained HTML page (jinja2, autoescaped): figures inline as data: URIs, CSS inline, no
script, and a Content-Security-Policy that forbids every fetch, so the file works offline and opening it
sends no request. Sections: summary, curves per sweep (and, fitted on several metrics, their parallel curves:
rlscale.report.parallel), ranking and LOO tables with the
Figure-7 plot of ScaleRL (arXiv 2510.13786), extrapolation check, diagnostics, the record of each run, and
the plan (plan.json) and its check against later runs (confirm.json) when they are in the results folder.
"""
from __future__ import annotations

import base64
import os
import datetime as dt
from pathlib import Path
from typing import Dict, Tuple

import jinja2
import markupsafe

from rlscale.fit.compare import table_family
from rlscale.fit.results import axis_label
from rlscale.fit.table import loo_caption
from rlscale.plan.confirm_view import confirm_title, difference_text, holm_text, pair_text, runs_text
from rlscale.plan.planner import EXTRAPOLATION_LIMIT
from rlscale.plan.view import new_seeds_header, new_seeds_text, notes as plan_notes, title as plan_title
from rlscale.report.extrapolation import extrapolation_check
from rlscale.report.formatting import ci, num, signed_ci
from rlscale.report.content import DIAGNOSTICS, TRUNCATION_FLAG, UNFINISHED_STATES, ReportData
from rlscale.report.figure7 import figure7_missing
from rlscale.report.ranking import by_seed, details, notes, p_text, points_text, rank_text
from rlscale.report.summary import summarize
from rlscale.runfolder.names import printable

TEMPLATES = Path(__file__).parent / "templates"
# (sweep, kind) -> PNG bytes of that figure; sweep "" for figures across sweeps.
Images = Dict[Tuple[str, str], bytes]


def printable_value(value):
    """Every value the page prints, with control characters and undecodable bytes of folder and variant
    names written as \\x.. escapes (rlscale.runfolder.names.printable); markup stays markup."""
    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(printable(value, layout=True))
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return printable(value, layout=True) if isinstance(value, str) else value


def render_page(report: ReportData, images: Images, colors: Dict[str, str], logx: bool = False) -> str:
    """The page as a string. ``colors`` maps each run's anchor to its colour in the figures."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=printable_value)
    env.filters.update(num=num, ci=ci, signed_ci=signed_ci, axis_label=axis_label)
    env.globals.update(by_seed=by_seed, details=details, notes=notes, points_text=points_text, rank_text=rank_text,
                       plan_notes=plan_notes, plan_title=plan_title, new_seeds_header=new_seeds_header,
                       new_seeds_text=new_seeds_text, confirm_title=confirm_title, difference_text=difference_text,
                       holm_text=holm_text, pair_text=pair_text, runs_text=runs_text, p_text=p_text,
                       table_family=table_family, loo_caption=loo_caption,
                       figure7_missing=figure7_missing)
    uris = {key: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for key, png in images.items()}
    return env.get_template("report.html.j2").render(
        report=report, summaries=summarize(report), extrapolation=extrapolation_check(report), images=uris,
        colors=colors, logx=logx,
        generated=dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        truncation_flag=TRUNCATION_FLAG, diagnostics=DIAGNOSTICS, unfinished=UNFINISHED_STATES,
        extrapolation_limit=EXTRAPOLATION_LIMIT,
        cutoffs=sorted({r.fit.cutoff for r in report.runs if r.fit is not None and r.fit.cutoff is not None}))

