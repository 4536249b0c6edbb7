"""``rlscale report``: the terminal summary, the self-contained HTML page (--html) and figure files for
papers (--figures), from the outputs of ``rlscale fit`` (refitted first when missing or stale)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rlscale.options import choices
from rlscale.report.formatting import FORMATS


def report_command(
    results_dir: Path = typer.Argument(Path("results"), help="Results folder (runs and fits.json)."),
    html: bool = typer.Option(False, "--html", help="Write one self-contained HTML file instead of the "
                                                    "terminal summary."),
    out: Optional[Path] = typer.Option(None, "--out", help="The HTML file (implies --html; "
                                       "default RESULTS_DIR/report.html; fits refitted then are not saved)."),
    figures: Optional[Path] = typer.Option(None, "--figures", help="Also write each figure as a file "
                                                                   "into this folder."),
    format: str = typer.Option("png", "--format", metavar=choices(FORMATS),
                               help="Format of the --figures files."),
    logx: bool = typer.Option(False, "--logx", help="Logarithmic compute axes."),
) -> None:
    """Report the fits of RESULTS_DIR: summary, curves, ranking, LOO, extrapolation, diagnostics."""
    from rich.text import Text

    from rlscale.cli.console import output_console
    from rlscale.cli.progress import work_progress
    from rlscale.fit.by_metric import further_fits
    from rlscale.report.build import write_report
    from rlscale.report.inputs import load_fits
    from rlscale.report.content import load_report
    from rlscale.report.parallel_join import attach_parallel
    from rlscale.report.pool import workers
    from rlscale.report.terminal import print_summary
    from rlscale.runfolder.names import printable

    if format not in FORMATS:
        raise typer.BadParameter(f"{format!r} is not one of {', '.join(FORMATS)}", param_hint="--format")
    err = output_console(stderr=True)
    if not results_dir.is_dir():
        err.print(Text(printable(f"no results folder {results_dir}"), style="red"))
        raise typer.Exit(2)
    misplaced = _misplaced(out, figures)
    if misplaced:
        err.print(Text(printable(f"error: {misplaced}"), style="red"))
        raise typer.Exit(2)
    html = html or out is not None
    n_workers = workers()
    with work_progress(err) as progress:
        progress.phase("checking the fits")
        fits = load_fits(results_dir, log=lambda line: progress.say(printable(line)), save=out is None,
                         phase=progress.phase, progress=progress.count)
        progress.phase("reading the runs")
        report = load_report(results_dir, fits, n_workers)
        further, stale = further_fits(results_dir)
        if stale:
            progress.say(printable(f"not shown beside {fits.settings.y}: {', '.join(stale)} (their fits are missing "
                                   f"or older than {results_dir / 'fits.json'}; rerun rlscale fit --y with them)"))
        attach_parallel(report, further)
        if not report.runs:
            err.print(Text(printable(f"error: no runs under {results_dir} (folders holding metrics.jsonl); nothing "
                                     "written"), style="red"))
            raise typer.Exit(1)
        progress.phase("writing the report")
        written = write_report(report, html=(out or results_dir / "report.html") if html else None,
                               figures=figures, fmt=format, logx=logx, n_workers=n_workers)
    if not html:
        out_console = output_console()
        print_summary(report, out_console)
        _print_plan(report, out_console)
    if written.html is not None:
        err.print(Text(printable(f"wrote {written.html} ({len(report.sweeps)} sweeps, {len(report.runs)} runs)")))
    if written.figures:
        err.print(Text(printable(f"wrote {len(written.figures)} figures to {figures}")))


def _print_plan(report, console) -> None:
    """The plan section and its check, when ``rlscale plan`` wrote plan.json and ``rlscale confirm``
    confirm.json in the results folder."""
    from rich.text import Text

    from rlscale.plan.confirm_view import confirm_view
    from rlscale.plan.view import plan_view
    from rlscale.runfolder.names import printable

    for read, view, command in ((report.plan, plan_view, "plan"), (report.confirm, confirm_view, "confirm")):
        if read is None:
            continue
        try:
            parts = view(read)
        except (KeyError, TypeError, ValueError) as err:
            console.print(Text(printable(f"{command}.json: unreadable {command} ({type(err).__name__}); "
                                         f"rerun rlscale {command}")))
            continue
        for part in parts:
            console.print(part)


def _misplaced(out: Optional[Path], figures: Optional[Path]) -> Optional[str]:
    """A folder where --out names a file, or a file where --figures names a folder."""
    if out is not None and out.is_dir():
        return f"--out {out} is a folder; it names the HTML file"
    if figures is not None and figures.exists() and not figures.is_dir():
        return f"--figures {figures} is a file; it names a folder"
    return None
