"""``rlscale plan RESULTS --budget C``: the best variant at a budget, the crossovers before it, the best
setting of a scaling sweep and what k new seeds will show at the budget (rlscale.plan.planner), with a
warning when the budget lies far beyond the observed compute or below it; writes RESULTS/plan.json (atomic)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rlscale.cli.fit import X_CHOICES, UsageError, compute_amount
from rlscale.options import choices


def plan_command(
    results_dir: Path = typer.Argument(Path("results"), help="Results folder (a sweep folder or a root)."),
    budget: float = typer.Option(..., "--budget", help="Compute budget C, in the fit's x unit (see --x)."),
    x: str = typer.Option("auto", "--x", metavar=choices(X_CHOICES),
                          help="Compute unit of the fits and of C (as rlscale fit's --x)."),
    y: str = typer.Option("val_reward", "--y", help="Eval metric (as rlscale fit's --y)."),
    margin: float = typer.Option(0.02, "--margin", help="Margin on the predicted reward for ties (paper: 0.02)."),
    n_boot: int = typer.Option(200, "--n-boot", help="Bootstrap resamples for one-seed variants (0: none)."),
    ci: float = typer.Option(0.95, "--ci", help="Interval level."),
    fit_until: Optional[str] = typer.Option(None, "--fit-until", help="Plan from the evals up to C or P% of each "
                                            "run (Section 5: fit at half the target budget)."),
    new_seeds: int = typer.Option(3, "--new-seeds", help="k: plan.json predicts the mean of k new seeds at C "
                                  "(a prediction interval; rlscale confirm checks it)."),
    no_correction: bool = typer.Option(False, "--no-correction", help="Cut the tiers with each comparison alone "
                                       "at --ci (default: Bonferroni over the tiers' comparisons)."),
    out: Optional[Path] = typer.Option(None, "--out", help="plan.json's folder (default: RESULTS_DIR)."),
) -> None:
    """Plan a budget from the fitted curves: the variant(s) with the highest predicted reward at C (ties when
    their difference is not resolved beyond the margin), where curves cross, and for scaling sweeps the
    setting that maximises the predicted reward at C."""
    from rlscale.cli.console import output_console
    from rlscale.fit.api import SourceError, fit_results
    from rlscale.fit.family import HOLM, NO_CORRECTION
    from rlscale.fit.results import FitSettings
    from rlscale.plan.planner import PLAN_JSON, plan_json, plan_sweeps
    from rlscale.plan.view import plan_view
    from rlscale.runfolder import atomic_write_json
    from rlscale.runfolder.discover import read_sweep_json

    if not budget > 0:
        raise typer.BadParameter(f"{budget!r}: the budget must be > 0", param_hint="--budget")
    if new_seeds < 1:
        raise typer.BadParameter(f"{new_seeds}: at least 1 new seed", param_hint="--new-seeds")
    if not results_dir.exists():
        typer.echo(f"error: {results_dir}: no such folder", err=True)
        raise typer.Exit(2)
    try:
        until_abs, until_frac = compute_amount(fit_until, "--fit-until")
        settings = FitSettings(x=x, y=y, margin=margin, n_boot=n_boot, ci_level=ci, predict_at=[budget],
                               fit_until=until_abs, fit_until_frac=until_frac,
                               correction=NO_CORRECTION if no_correction else HOLM)
        results = fit_results(results_dir, settings)
    except (SourceError, UsageError) as err:
        typer.echo(f"error: {' '.join(str(err).split())}", err=True)
        raise typer.Exit(2)
    sweeps = {run.sweep: read_sweep_json(Path(run.run_path).parent) for run in results.runs}
    plans = plan_sweeps(results.runs, sweeps, results.settings, budget, new_seeds)
    if not plans:
        typer.echo(f"error: no run under {results_dir} could be fitted; nothing planned", err=True)
        raise typer.Exit(1)
    path = (out or results_dir) / PLAN_JSON
    plan = plan_json(plans, results.settings)
    atomic_write_json(path, plan)
    console = output_console()
    for part in plan_view(plan):
        console.print(part)
    console.print(f"wrote {path}")
