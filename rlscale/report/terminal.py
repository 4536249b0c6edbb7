"""``rlscale report`` without --html: the summary and each sweep's ranking as terminal tables (rich).

Names and messages are passed as ``rich.text.Text`` so brackets in a variant name are never read as markup.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rlscale.report.formatting import ci, num
from rlscale.report.model import UNFINISHED_STATES, ReportData
from rlscale.report.summary import summarize
from rlscale.results.names import printable


def print_summary(report: ReportData, console: Console) -> None:
    s = report.settings
    console.print(Text(printable(f"{report.results_dir}: {len(report.sweeps)} sweeps, {len(report.runs)} runs. "
                       f"Fit: x={s.x}, cutoff={s.cutoff_rule or '-'}, fit_until={num(s.fit_until, 0)}, "
                       f"method={s.method}, margin on A={s.margin}")))
    overview = Table(title="Sweeps", title_justify="left")
    for column in ("sweep", "runs", "states", "fits ok", "highest A", "highest B", "truncation > 10 %"):
        overview.add_column(column)
    for sm in summarize(report):
        overview.add_row(*map(_text, (
            sm.name, str(sm.n_runs), " ".join(f"{k}={v}" for k, v in sm.states.items()), str(sm.n_fit_ok),
            f"{sm.best_A.name} ({num(sm.best_A.value)})" if sm.best_A else "-",
            f"{sm.best_B.name} ({num(sm.best_B.value, 2)})" if sm.best_B else "-",
            str(sm.n_truncation_flagged))))
    console.print(overview)
    for sweep in report.sweeps:
        table = Table(title=Text(printable(f"{sweep.name}: ranking by A (ties within the margin broken by B)")),
                      title_justify="left")
        for column in ("rank", "variant", "state", "A", "A CI", "B", "C_mid", "fit"):
            table.add_column(column, justify="right" if column in ("rank", "A", "B", "C_mid") else "left")
        for run in sweep.runs:
            row = sweep.rank_of(run)
            rank = str(row.rank) if row is not None and row.rank is not None else "-"
            f = run.fit
            numbers = ((num(f.A), ci(f.A_lo, f.A_hi), num(f.B, 2), num(f.C_mid, 0)) if run.fit_ok
                       else ("-", "", "-", "-"))
            table.add_row(*map(_text, (rank, run.name, run.state, *numbers, "ok" if run.fit_ok else run.fit_message)))
        console.print(table)
    stopped = [run for run in report.runs if run.state in UNFINISHED_STATES]
    for run in stopped:
        console.print(Text(printable(f"{run.state}: {run.sweep}/{run.name}: {run.reason}"), style="red"))


def _text(value: str) -> Text:
    return Text(printable(value))
