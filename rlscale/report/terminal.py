"""``rlscale report`` without --html: the summary, each sweep's ranking and its LOO verdicts with their
intervals as terminal tables (rich), the sweeps whose eval noise exceeds half the margin, and the
extrapolation check of fits made with ``--fit-until`` (one row per checked run, the median and max error).

Names and messages are passed as ``rich.text.Text`` so brackets in a variant name are never read as markup.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rlscale.fit.results import FitSettings, axis_label
from rlscale.fit.table import loo_caption
from rlscale.report.extrapolation import ExtrapolationCheck, extrapolation_check
from rlscale.report.formatting import ci, num, signed_ci
from rlscale.report.content import UNFINISHED_STATES, ReportData, SweepView
from rlscale.report.ranking import by_seed, notes, rank_text
from rlscale.report.summary import summarize
from rlscale.runfolder.names import printable
from rlscale.tables import WrappingTable


def print_summary(report: ReportData, console: Console) -> None:
    s = report.settings
    console.print(Text(printable(f"{report.results_dir}: {len(report.sweeps)} sweeps, {len(report.runs)} runs. "
                       f"Fit: x={axis_label(s.x)}, cutoff={s.cutoff_rule or '-'}, fit_until={num(s.fit_until, 0)}, "
                       f"method={s.method}, margin on A={s.margin}")))
    overview = WrappingTable(title="Sweeps", title_justify="left")
    for column in ("sweep", "runs", "states", "fits ok", "A not identified", "highest A", "highest B",
                   "truncation rising", "eval SE"):
        overview.add_column(column)
    summaries = summarize(report)
    for sm in summaries:
        overview.add_row(*map(_text, (
            sm.name, str(sm.n_runs), " ".join(f"{k}={v}" for k, v in sm.states.items()), str(sm.n_fit_ok),
            str(sm.n_unidentified), f"{sm.best_A.name} ({num(sm.best_A.value)})" if sm.best_A else sm.no_best_A,
            f"{sm.best_B.name} ({num(sm.best_B.value, 2)})" if sm.best_B else sm.no_best_A,
            str(sm.n_truncation_flagged), sm.eval_se_text)))
    console.print(overview)
    for sm in summaries:
        if sm.noise is not None and sm.noise.flagged:
            console.print(Text(printable(f"{sm.name}: {sm.noise.describe()}"), style="yellow"))
    for sweep in report.sweeps:
        console.print(_ranking_table(sweep))
        if sweep.loo:
            console.print(_loo_table(sweep, s))
    _print_extrapolation(extrapolation_check(report), console)
    stopped = [run for run in report.runs if run.state in UNFINISHED_STATES]
    for run in stopped:
        console.print(Text(printable(f"{run.state}: {run.sweep}/{run.name}: {run.reason}"), style="red"))


def _ranking_table(sweep: SweepView) -> Table:
    """One row per variant, its seeds folded (rlscale.report.ranking)."""
    table = WrappingTable(title=Text(printable(f"{sweep.name}: ranking by A in tiers, then B at the tier's mean A "
                                       "('=': tie; A and B: seed means)")), title_justify="left")
    for column in ("rank", "variant", "state", "A", "by seed / CI", "B", "C_mid", "note"):
        table.add_column(column, justify="right" if column in ("rank", "A", "B", "C_mid") else "left")
    for v in sweep.variants:
        states = " ".join(f"{k}={n}" if len(v.runs) > 1 else k for k, n in v.states.items())
        numbers = ((num(v.mean("A")), by_seed(v, "A"), num(v.mean("B"), 2), num(v.mean("C_mid"), 0))
                   if v.fitted else ("-", "", "-", "-"))
        note = Text("\n").join(_text(line.text) for line in notes(v))  # one note to a line
        table.add_row(*map(_text, (rank_text(v.row), v.variant, states, *numbers)), note)
    return table


def _loo_table(sweep: SweepView, settings: FitSettings) -> Table:
    table = WrappingTable(title=Text(printable(f"{sweep.name}: leave-one-out, {loo_caption(sweep.loo, settings)}")),
                          title_justify="left")
    for column in ("variant", "axis", "dA [CI]", "dB [CI]", "interval", "verdict"):
        table.add_column(column, justify="right" if column.startswith("d") else "left")
    for row in sweep.loo:
        table.add_row(*map(_text, (row.variant, row.axis or "-", signed_ci(row.dA, row.dA_lo, row.dA_hi),
                                  signed_ci(row.dB, row.dB_lo, row.dB_hi, 2), row.interval_source,
                                  row.verdict_text or row.note)))
    return table


def _print_extrapolation(check: ExtrapolationCheck, console: Console) -> None:
    """The runs fitted up to fit_until against the mean of their last evals beyond it; nothing when the fits
    made no check."""
    if check.rows:
        table = WrappingTable(title="Extrapolation check: fitted up to fit_until, against the mean of the last evals "
                            "beyond it", title_justify="left")
        several = len({row.sweep for row in check.rows}) > 1
        for column in ("sweep",) * several + ("run", "fit until", "evals", "observed", "predicted",
                                              "PI", "|err| sigmoid", "|err| carry-forward", "|err| power law",
                                              "best"):
            table.add_column(column, justify="left" if column in ("sweep", "run") else "right")
        for row in check.rows:
            law = num(row.power_law_error) if row.power_law_error is not None else row.power_law_note
            table.add_row(*map(_text, (row.sweep,) * several + (
                row.run.name, num(row.fit_until, 0), str(row.evals), num(row.observed), num(row.predicted),
                ci(row.lo, row.hi), num(row.error), num(row.carry_forward_error), law, row.best or "-")))
        console.print(table)
        console.print(_text(check.summary.describe()))
        for sweep, summary in check.forecasts:
            console.print(_text(f"{sweep}: {summary.describe()}"))
    reasons: dict = {}
    for sweep, run, why in check.unchecked:  # a failed fit's message is in the ranking table already
        reasons.setdefault(why if run.fit_ok else "no usable fit", []).append(f"{sweep}/{run.name}")
    for why, names in reasons.items():
        console.print(Text(printable(f"no extrapolation check ({why}): {', '.join(names)}"), style="yellow"))


def _text(value: str) -> Text:
    return Text(printable(value))
