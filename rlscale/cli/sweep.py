"""``rlscale sweep`` and ``rlscale status``: the command-line faces of ``rlscale.sweep``."""
from __future__ import annotations

from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import Callable, Dict, List, Optional, TypeVar

import typer
from rich.console import Console

from rlscale.cli.console import output_console
from rlscale.engines.memory import DEFAULT_PROMPT_TOKENS
from rlscale.paths import CONFIG_DIR_HELP, CONFIG_PATH_HELP, add_config_dir, set_config_path
from rlscale.sweep.status import collect, refs_under
from rlscale.sweep.status_json import status_json
from rlscale.runfolder.lock import FolderLock
from rlscale.runfolder.names import printable, shown
from rlscale.sweep.detach import streams_detached
from rlscale.sweep.interrupt import Interrupted, SweepSignals
from rlscale.sweep.memory_table import memory_table
from rlscale.sweep.prune import advance, pruning_summary
from rlscale.sweep.selection import parse_only, parse_seeds
from rlscale.sweep.orchestrator import SubmissionFailed, SweepPlan, SweepRequest, decide, plan_sweep, submit_sweep, write_scripts, write_sweep
from rlscale.sweep.spec import SpecError
from rlscale.sweep.stop import stop_line
from rlscale.sweep.table import progress_table, specs_table, summary, variants_table, watch

T = TypeVar("T")


def sweep_command(
    overrides: List[str] = typer.Argument(None, help="conf=NAME (a spec of --config-dir DIR/sweeps/, ./sweeps/ "
                                          "or the packaged ones; or a .yaml path), then "
                                          "Hydra overrides applied to every variant, e.g. launcher=slurm"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="N runs per variant (<variant>_s<k>, seed=k for k "
                                        "= 0..N-1), or the seeds themselves: 10,11,12 or 10-12"),
    only: Optional[str] = typer.Option(None, "--only", help="train only these variants (comma-separated names; "
                                       "the sweep's other runs are left as they are)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the variants, write the configs and "
                                 "<sbatch-dir>/<sweep>/*.sbatch, submit nothing"),
    prompt_tokens: int = typer.Option(DEFAULT_PROMPT_TOKENS, "--prompt-tokens", min=1,
                                      help="--dry-run: the prompt length its memory estimate per GPU counts (the "
                                      "completion budget comes from the config)"),
    sbatch_dir: Optional[Path] = typer.Option(None, "--sbatch-dir", help="where --dry-run writes <sweep>/*.sbatch "
                                              "(default: slurm/ beside the results root)"),
    detach: bool = typer.Option(False, "--detach", help="return once submitted (watch with rlscale status)"),
    force: bool = typer.Option(False, "--force", help="clear every run and rerun all"),
    results: Path = typer.Option(Path("results"), "--results", help="results root"),
    prune: bool = typer.Option(False, "--prune", help="stop variants whose predicted final reward is below the "
                               "best's beyond the margin, at 25 % and 50 % of the planned steps (or the spec's "
                               "pruning: block)"),
    resume_pruned: bool = typer.Option(False, "--resume-pruned", help="train the pruned runs on to the end"),
    config_dir: Optional[Path] = typer.Option(None, "--config-dir", "-cd", help=CONFIG_DIR_HELP),
    config_path: Optional[Path] = typer.Option(None, "--config-path", "-cp", help=CONFIG_PATH_HELP),
    list_specs: bool = typer.Option(False, "--list", help="list the sweep specs conf=NAME can take, with their "
                                    "descriptions, and exit"),
) -> None:
    """Run a sweep: expand and validate every variant, write results/<sweep>/, submit through submitit
    (local executor, or SLURM job arrays with launcher=slurm) and show progress until done. --dry-run also
    prints each job's estimated memory per GPU. Rerunning
    the same command skips finished runs and resubmits failed or missing ones. Ctrl-C or SIGTERM stops a
    foreground sweep's local lanes (their runs resume on a rerun); detached and SLURM jobs go on."""
    if config_path is not None:
        set_config_path(config_path)
    if config_dir is not None:
        add_config_dir(config_dir)
    console = output_console()
    if list_specs:
        console.print(specs_table(), markup=False)
        return
    plan: Optional[SweepPlan] = None
    jobs: Dict[str, str] = {}
    with SweepSignals() as signals, ExitStack() as held:
        try:
            request = SweepRequest(args=tuple(overrides or ()), seeds=parse_seeds(seeds), only=parse_only(only),
                                   force=force, results=results, prune=prune, resume_pruned=resume_pruned)
            plan = plan_sweep(request)  # validates every variant; writes nothing
            held.enter_context(FolderLock(plan.sweep_dir, "sweep folder"))  # until the sweep is watched to its end
            plan = decide(plan.spec, plan.sweep_dir, plan.runs, plan.cli, request)
            for note in sorted({f"variant {run.run.variant}: {note}" for run in plan.runs for note in run.notes}):
                console.print(f"note: {note}", markup=False)
            write_sweep(plan, force=force, reason="not submitted (dry run)" if dry_run else "queued")
            if dry_run:
                console.print(variants_table(f"sweep {plan.spec.name} ({plan.spec.kind}, {plan.record.launcher})",
                                             plan.runs, plan.spec.base.name))
                console.print(memory_table(plan.runs, prompt_tokens))
                scripts, stale = write_scripts(plan, sbatch_dir or results.parent / "slurm")
                removed = f" (removed {len(stale)} of an earlier dry run)" if stale else ""
                console.print(f"wrote {len(scripts)} sbatch scripts to {scripts[0].parent}/{removed} and the run "
                              f"configs under {plan.sweep_dir}/; nothing submitted", markup=False)
                return
            with signals.deferred(), streams_detached() if detach else nullcontext():
                jobs = submit_sweep(plan)
            _follow(plan, jobs, detach, console)
        except SpecError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2)
        except SubmissionFailed as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1)
        except Interrupted as stop:  # further signals are dropped: stopping the lanes is not interrupted
            try:
                line = stop_line(stop, plan.sweep_dir if plan else None, plan.record.launcher if plan else None,
                                 jobs, detach)
            except SpecError as err:  # a lane that outlived its kill, SLURM not answering
                line = f"interrupted ({stop.name}); error: {err}"
            typer.echo(printable(line), err=True)
            raise typer.Exit(stop.exit_code)


def _follow(plan: SweepPlan, jobs: Dict[str, str], detach: bool, console: Console) -> None:
    """Say what was submitted, then (unless ``detach``) show progress until every run is finished."""
    skipped = ", ".join(f"{name} ({why})" for name, why in plan.skipped.items())
    console.print(f"sweep {plan.spec.name}: submitted {len(jobs)} run(s) via {plan.record.launcher}"
                  + (f"; skipped {skipped}" if skipped else ""), markup=False)
    if detach:
        console.print(f"detached; follow with: rlscale status {plan.sweep_dir}", markup=False)
        return
    refs = refs_under(plan.sweep_dir)
    pruning = plan.pruning if plan.rungs or plan.record.launcher != "local" else None

    def poll():
        if pruning is not None:  # local lanes decide too; SLURM runs need the attached sweep to be pruned
            advance(plan.sweep_dir, plan.record, pruning)
        return collect(refs)

    rows = watch(poll, console, title=f"sweep {plan.spec.name}")  # SIGINT, SIGTERM: rlscale.sweep.interrupt
    if plan.pruning is not None:
        state = advance(plan.sweep_dir, plan.record, plan.pruning)
        console.print(pruning_summary(state))
    bad = [row.ref.run for row in rows if row.state not in ("done", "diverged", "pruned")]
    if bad:
        console.print(f"not finished: {', '.join(bad)} (see their status.json; rerun to resubmit)")
        raise typer.Exit(1)


def status_command(results_dir: Path = typer.Argument(Path("results"), help="results root, a sweep folder "
                                                      "or a run folder"),
                   as_json: bool = typer.Option(False, "--json", help="print the runs' status as one JSON document "
                                                "instead of the table")) -> None:
    """Show the state, step, latest validation reward and ETA of every run under RESULTS_DIR."""
    refs = _under(results_dir, refs_under)
    if as_json:
        typer.echo(status_json(results_dir, collect(refs)))
        return
    if not refs:
        typer.echo(f"no runs under {printable(results_dir)}")
        return
    rows = collect(refs)
    console = output_console()
    console.print(progress_table(rows, title=f"runs under {shown(results_dir)}"))
    console.print(summary(rows), markup=False)


def cancel_command(results_dir: Path = typer.Argument(Path("results"), help="results root or a sweep folder")) -> None:
    """Stop the queued and running jobs of the sweeps under RESULTS_DIR (scancel for SLURM, the local lanes'
    processes otherwise); their unfinished runs are marked failed (cancelled), and rerunning the sweep resumes
    them from their last checkpoints."""
    from rlscale.sweep.cancel import cancel_jobs

    done = _under(results_dir, cancel_jobs)
    if not done.jobs:
        typer.echo(f"nothing to cancel: no job of the sweeps under {printable(results_dir)} is queued or running")
        return
    jobs = "; ".join(f"{launcher} {', '.join(ids)}" for launcher, ids in done.jobs.items())
    typer.echo(printable(f"cancelled jobs ({jobs}); {len(done.runs)} unfinished run(s) marked cancelled: "
                         + ", ".join(str(p) for p in done.runs)))


def _under(results_dir: Path, act: Callable[[Path], T]) -> T:
    """``act(results_dir)``; one line and exit status 2 when the folder is missing or a sweep record there is
    unreadable (or SLURM does not answer)."""
    if not results_dir.exists():
        typer.echo(f"error: {printable(results_dir)}: no such folder", err=True)
        raise typer.Exit(2)
    try:
        return act(results_dir)
    except SpecError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
