"""``rlscale fit``: fit Eq. 1 to every run under RESULTS_DIR, rank the variants, analyse LOO sweeps,
check extrapolation, and write fits.json, fits.csv and comparison.csv (App. A.4-A.7, Section 4).

Exit status: 0 if at least one run fitted (status ok), 1 if none (then nothing is written, so earlier
outputs survive), 2 for usage errors (including an ``--x``/``--y`` that no eval line holds: one line
listing the metrics found, nothing written).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import typer

from rlscale.fit.family import HOLM, NO_CORRECTION
from rlscale.fit.methods import METHOD
from rlscale.fit.results import X_UNITS, FitResults
from rlscale.options import FINITE, choices, NON_NEGATIVE, OPEN_UNIT, OptionError, check_ranges

if TYPE_CHECKING:
    from rlscale.cli.progress import WorkProgress

X_CHOICES = ("auto",) + X_UNITS


class UsageError(ValueError):
    """A bad option value; the message names the option."""


def fit_command(
    results_dir: Path = typer.Argument(Path("results"), help="Results folder (runs at any depth) or a tidy "
                                       "CSV/parquet file with columns run, x, y and optional seed, sweep."),
    x: str = typer.Option("auto", "--x", metavar=choices(X_CHOICES),
                          help="Compute unit (auto: gpu_hours when every run's eval lines carry it, else flops)."),
    y: str = typer.Option("val_reward", "--y", help="Eval metric to fit, e.g. val_reward/math for one task; "
                          "several, comma-separated, are fitted one by one (the first's files in the results "
                          "folder, the others' in fits-<metric>/)."),
    min_compute: Optional[str] = typer.Option(None, "--min-compute", help="Cutoff: C (absolute) or P% of each run. "
                                              "Default: min(1.5k GPU-hours, 10% of the run); 10% in other units."),
    fit_until: Optional[str] = typer.Option(None, "--fit-until", help="Fit only x <= C (or P% of each run) and "
                                            "check the prediction at the last eval beyond it."),
    predict_at: Optional[List[float]] = typer.Option(None, "--predict-at", help="Predict the reward at C "
                                                     "(repeatable)."),
    method: str = typer.Option("fast", "--method", metavar=choices(METHOD.names),
                               help="fast (continuous search) or paper (App. A.5 grid)."),
    margin: float = typer.Option(0.02, "--margin", help="Margin on A for ties (paper: 0.02)."),
    margin_b: float = typer.Option(0.10, "--margin-b", help="Band of 'within margin' on dB, a fraction of the base's "
                                   "B."),
    unpaired: bool = typer.Option(False, "--unpaired", help="Compare seed means, not seed by seed (for runs whose "
                                  "equal seeds do not share random numbers)."),
    no_correction: bool = typer.Option(False, "--no-correction", help="Judge each comparison of a table alone at "
                                       "--ci (default: Holm over a LOO table, Bonferroni over tiers, so the chance "
                                       "of any false finding in a table is at most 1 - --ci)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: RESULTS_DIR)."),
    r0: Optional[float] = typer.Option(None, "--r0", help="R0 for every run (default: each run's step-0 eval)."),
    ci: float = typer.Option(0.95, "--ci", help="Interval level."),
    n_boot: int = typer.Option(200, "--n-boot", help="Bootstrap resamples for B, C_mid and predictions (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    force: bool = typer.Option(False, "--force", help="Run an --n-boot above 100,000 (refused otherwise, with its "
                               "expected time and memory)."),
    a_grid: str = typer.Option("0.45:0.8:0.005", "--a-grid", help="Paper method's A grid LO:HI:STEP."),
    c_mid_grid: Optional[str] = typer.Option(None, "--c-mid-grid", help="Absolute C_mid grid LO:HI:N (default: "
                                             "the paper's 100:40000:100, rescaled to short runs)."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Processes fitting runs in parallel (0: one per CPU, with "
                             "at least 100 runs each)."),
) -> None:
    """Fit the ScaleRL sigmoid to every run under RESULTS_DIR and compare the variants."""
    from rlscale.cli.console import output_console
    from rlscale.cli.progress import work_progress
    from rlscale.fit.api import SourceError, fit_results, write_outputs
    from rlscale.fit.bootstrap import MAX_N_BOOT
    from rlscale.fit.by_metric import metric_folder, write_index
    from rlscale.fit.curves import load_source
    from rlscale.fit.outputs import write_files
    from rlscale.fit.results import FitSettings
    from rlscale.fit.table import render

    err = output_console(stderr=True)
    try:
        if x not in X_CHOICES:
            raise UsageError(f"--x must be one of {', '.join(X_CHOICES)} (got {x!r})")
        if method not in METHOD.names:
            raise UsageError(f"--method must be one of {', '.join(METHOD.names)} (got {method!r})")
        check_ranges({"--margin": (margin, NON_NEGATIVE), "--margin-b": (margin_b, NON_NEGATIVE),
                      "--ci": (ci, OPEN_UNIT), "--n-boot": (n_boot, NON_NEGATIVE),
                      "--jobs": (jobs, NON_NEGATIVE), "--seed": (seed, NON_NEGATIVE), "--r0": (r0, FINITE),
                      "--predict-at": (predict_at, NON_NEGATIVE)})
        if out is not None and out.exists() and not out.is_dir():
            raise UsageError(f"--out {out} is a file; it names the output folder")
        cut_abs, cut_frac = compute_amount(min_compute, "--min-compute")
        until_abs, until_frac = compute_amount(fit_until, "--fit-until")
        c_grid = list(_grid(c_mid_grid, "--c-mid-grid", integer_last=True)) if c_mid_grid else None
        metrics = _metrics(y)
        settings = FitSettings(x=x, y=metrics[0], method=method, margin=margin, fit_until=until_abs, fit_until_frac=until_frac,
                               predict_at=list(predict_at or []), ci_level=ci, n_boot=n_boot, seed=seed, r0=r0,
                               min_compute=cut_abs, min_compute_frac=cut_frac, c_mid_grid=c_grid,
                               paired=not unpaired, margin_b=margin_b,
                               correction=NO_CORRECTION if no_correction else HOLM,
                               a_grid=list(_grid(a_grid, "--a-grid", integer_last=False)))
        for metric in metrics[1:]:  # every metric is checked before any is fitted
            load_source(results_dir, x, metric)
        if n_boot > MAX_N_BOOT and not force:
            raise UsageError(_bootstrap_refusal(n_boot, load_source(results_dir, x, metrics[0])))
        fitted = []
        with work_progress(err) as progress:
            for metric in metrics:
                about = f" ({metric})" if len(metrics) > 1 else ""
                started = progress.elapsed()
                fitted.append(fit_results(results_dir, replace(settings, y=metric), jobs=jobs, phase=progress.phase,
                                          progress=announced(progress, f"under {results_dir} ({n_boot} bootstrap "
                                                                       f"resamples){about}")))
                progress.say(tally(fitted[-1], progress.elapsed() - started) + about)
    except (UsageError, OptionError, SourceError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    results = fitted[0]
    if not results.runs:
        err.print(f"no runs found under {results_dir}", markup=False, highlight=False)
        raise typer.Exit(1)
    out_dir = out if out is not None else (results_dir if results_dir.is_dir() else results_dir.parent)
    paths = write_outputs(results, out_dir)
    out_console = output_console()
    render(results, out_console)
    if paths:
        for further in fitted[1:]:
            render(further, out_console)
            folder = metric_folder(out_dir, further.settings.y)  # written even when no run fitted: the report
            folder.mkdir(exist_ok=True)                           # shows why beside the first metric
            paths += write_files(further, folder)
        paths += write_index(out_dir, metrics)
    if not paths:
        first = (f" on {metrics[0]}, the first --y metric, whose fits are the folder's own (list one that fits "
                 "first)") if len(metrics) > 1 else ""
        err.print(f"no run fitted{first}: nothing written to {out_dir}", markup=False, highlight=False)
        raise typer.Exit(1)
    out_console.print("wrote " + ", ".join(str(p) for p in paths), markup=False, highlight=False)
    raise typer.Exit(0)


def _bootstrap_refusal(n_boot: int, source) -> str:
    """Why ``--n-boot`` is refused: its expected CPU time and memory over the runs of ``source``."""
    from rlscale.fit.bootstrap import MAX_N_BOOT, bootstrap_cost

    points = [curve.x.size for curve in source.curves]
    seconds, peak = bootstrap_cost(n_boot, points)
    return (f"--n-boot {n_boot:,} is above {MAX_N_BOOT:,}: about {seconds / 3600:,.1f} CPU-hours and "
            f"{peak / 2**30:,.1f} GiB for {len(points)} run{'' if len(points) == 1 else 's'} of up to {max(points, default=0):,} evals; lower it or "
            "pass --force")


def _metrics(text: str) -> List[str]:
    """``--y``'s comma-separated metrics, each named once."""
    metrics = [m.strip() for m in text.split(",")]
    if not all(metrics):
        raise UsageError(f"--y takes metric names separated by commas (got {text!r})")
    repeated = sorted({m for m in metrics if metrics.count(m) > 1})
    if repeated:
        raise UsageError(f"--y names {', '.join(repeated)} more than once")
    return metrics


def compute_amount(text: Optional[str], option: str) -> Tuple[Optional[float], Optional[float]]:
    """'C' -> (C, None); 'P%' -> (None, P / 100)."""
    if text is None:
        return None, None
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise UsageError(f"{option} takes a compute value or a percentage like 50% (got {text!r})") from None
    if not NON_NEGATIVE.holds(value) or (text.endswith("%") and value > 100):
        raise UsageError(f"{option} must be {NON_NEGATIVE.describe()} (a percentage at most 100%) (got {text!r})")
    return (None, value / 100) if text.endswith("%") else (value, None)


def _grid(text: str, option: str, integer_last: bool) -> Tuple[float, float, float]:
    """'LO:HI:STEP' (or LO:HI:N) with LO <= HI and a positive last part."""
    try:
        lo, hi, last = (float(part) for part in text.split(":"))
    except ValueError:
        raise UsageError(f"{option} takes LO:HI:{'N' if integer_last else 'STEP'} (got {text!r})") from None
    if not (lo <= hi and last > 0 and (not integer_last or (last == int(last) and lo > 0))):
        raise UsageError(f"{option} needs LO <= HI and a positive {'integer N, LO > 0' if integer_last else 'STEP'} "
                         f"(got {text!r})")
    return lo, hi, int(last) if integer_last else last


def announced(progress: WorkProgress, where: str) -> Callable[[int, int], None]:
    """The ``progress(done, total)`` of ``fit_results`` on ``progress``: ``fitting N runs <where>`` once the runs
    are read, then the count."""

    def show(done: int, total: int) -> None:
        if done == 0:
            progress.say(f"fitting {total} runs {where}")
        progress.count(done, total)

    return show


def tally(results: FitResults, seconds: float) -> str:
    """``fitted 3 of 3 runs in 2 s``, or ``fitted 0 of 3 runs in 1 s; not fitted: 3 too_few_points``: the runs
    whose status is ok (or repaired), as the exit status counts them."""
    from collections import Counter

    failed = Counter(run.status for run in results.runs if not run.fitted)
    why = "; not fitted: " + ", ".join(f"{n} {status}" for status, n in sorted(failed.items())) if failed else ""
    return f"fitted {len(results.runs) - sum(failed.values())} of {len(results.runs)} runs in {seconds:.0f} s{why}"
