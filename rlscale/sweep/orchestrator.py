"""``rlscale sweep`` end to end: plan (expand, validate every variant, decide what to (re)submit), then
write the sweep's state and submit.

Nothing is written or submitted until every variant composed and validated. A rerun skips the runs that
finished (done or diverged) and the runs whose job is still alive, and resubmits the failed, lost and
never-started ones; the trainer resumes each from its own checkpoints. ``--force`` clears every run and
reruns all. A run whose config changed since it made progress is an error unless ``--force``. With
``--prune`` (or a ``pruning:`` block in the spec) the sweep stops hopeless variants at rungs
(rlscale.sweep.prune); a pruned run is skipped by reruns unless ``--resume-pruned``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from rlscale.runfolder import RunState, atomic_write_text, read_status, write_status
from rlscale.runfolder.lock import held_by
from rlscale.train.records import write_records
from rlscale.runfolder.status import PRUNE_REQUEST
from rlscale.sweep.dispatch import alive, local_lanes, submit
from rlscale.sweep.expand import expand
from rlscale.sweep.prune import PruningConfig, resume_pruned
from rlscale.sweep.resolve import ResolvedRun, resolve_runs, results_root
from rlscale.sweep.selection import SeedChoice
from rlscale.sweep.sbatch import check_launcher, render_sbatch, script_path
from rlscale.sweep.spec import SpecError, SweepSpec, find_spec, load_spec, split_cli
from rlscale.sweep.state import (SweepRecord, clear_run, config_conflict, has_progress, new_record, planned_steps,
                                 read_record, write_config, write_record)

DONE_STATES = (RunState.DONE.value, RunState.DIVERGED.value)
FINAL_STATES = DONE_STATES + (RunState.FAILED.value, RunState.PRUNED.value)


class SubmissionFailed(RuntimeError):
    """The launcher did not take the runs; the message is one line with its reason."""


@dataclass(frozen=True)
class SweepRequest:
    """What the user asked: ``conf=NAME`` and Hydra overrides, ``--seeds`` (None: the spec's count), ``--only``,
    ``--force``, ``--results``, ``--prune``, ``--resume-pruned``."""

    args: Tuple[str, ...]
    seeds: Optional[SeedChoice] = None
    only: Optional[Tuple[str, ...]] = None
    force: bool = False
    results: Path = Path("results")
    prune: bool = False
    resume_pruned: bool = False


@dataclass
class SweepPlan:
    """The validated sweep and, per run, whether it is submitted or why it is skipped."""

    spec: SweepSpec
    sweep_dir: Path
    runs: List[ResolvedRun]
    record: SweepRecord
    submit: List[ResolvedRun] = field(default_factory=list)
    skipped: Dict[str, str] = field(default_factory=dict)
    cli: Tuple[str, ...] = ()
    pruning: Optional[PruningConfig] = None
    resumed: List[ResolvedRun] = field(default_factory=list)

    @property
    def rungs(self) -> Tuple[float, ...]:
        """The rungs local lanes pause at: none when not pruning or when resuming pruned runs."""
        return self.pruning.rungs if self.pruning is not None and not self.resumed else ()


def plan_sweep(request: SweepRequest) -> SweepPlan:
    """Expand and validate every variant, then decide what to submit; reads the disk, writes nothing."""
    conf, cli = split_cli(list(request.args))
    spec = load_spec(find_spec(conf))
    runs = resolve_runs(spec, expand(spec, request.seeds, request.only), cli, request.results)
    for run in runs:
        try:
            check_launcher(run.cfg.launcher)
        except SpecError as err:
            raise SpecError(f"{spec.path}: variant '{run.run.variant}': {err}") from None
    if runs and runs[0].cfg.launcher.name == "local":
        local_lanes(runs)  # GPUs enough for launcher.gpus_per_node, before anything is written
    sweep_dir = results_root(request.results) / spec.name
    return decide(spec, sweep_dir, runs, tuple(cli), request)


def longer_run(run: ResolvedRun, conflict: Optional[str], state: str) -> Optional[int]:
    """The existing step count of a run whose config differs from the spec's in ``trainer.max_steps`` alone,
    where that makes one of them an extension of the other (rlscale.train.entry.extend_run): the spec asks
    more of any run, or a finished run was extended beyond it. None otherwise."""
    steps = planned_steps(run) if conflict == "trainer" else None
    if steps is None or config_conflict(run, ignore_steps=True) is not None:
        return None
    planned = int(run.cfg.trainer.max_steps)
    return steps if planned > steps or state in DONE_STATES else None


def decide(spec: SweepSpec, sweep_dir: Path, runs: List[ResolvedRun], cli: Tuple[str, ...],
           request: SweepRequest) -> SweepPlan:
    """What to submit, decided from the disk as it is now (``rlscale sweep`` decides again once it holds
    the sweep folder's lock, so two sweeps never both submit a run)."""
    previous = read_record(sweep_dir)
    record = new_record(spec, runs, cli, len(request.seeds.values) if request.seeds else spec.seeds,
                        previous)
    pruning = None
    if request.prune or spec.pruning not in (None, False):
        pruning = PruningConfig.parse(True if spec.pruning is None else spec.pruning, f"{spec.path}: field 'pruning'")
        record.pruning = asdict(pruning)
    live = alive(previous.launcher, record.jobs.values()) if previous else set()
    plan = SweepPlan(spec=spec, sweep_dir=sweep_dir, runs=runs, record=record, cli=cli, pruning=pruning)
    for run in runs:
        name, job = run.run.name, record.jobs.get(run.run.name)
        state = read_status(run.run_dir)["state"]
        busy = job in live and state not in FINAL_STATES  # a finished run's job may still run other runs
        holder = held_by(run.run_dir)  # e.g. an `rlscale run --run-dir` started by hand
        if request.force:
            if job in live or holder:
                raise SpecError(f"{run.run_dir}: {f'job {job}' if job in live else holder} is still running it; "
                                "stop it before --force")
            plan.submit.append(run)
            continue
        if holder and not busy:
            plan.skipped[name] = f"in use by {holder}"
            continue
        conflict = config_conflict(run)
        steps = longer_run(run, conflict, state)
        if steps is not None and not busy:
            if steps > int(run.cfg.trainer.max_steps):  # extended by hand beyond the spec: keep its config
                plan.skipped[name] = f"finished (extended to {steps} steps)"
            else:  # the spec plans more steps: the run goes on from its last checkpoint
                plan.submit.append(run)
            continue
        if conflict and busy:
            raise SpecError(f"{run.run_dir}: still running as job {job}; cancel it before changing its config "
                            f"(field '{conflict}')")
        if conflict and has_progress(run.run_dir):
            raise SpecError(f"{run.run_dir}/config.yaml: field '{conflict}' differs from the new config; use "
                            "--force to rerun from scratch, or another --results")
        if state == RunState.PRUNED.value and request.resume_pruned and not busy:
            plan.submit.append(run)
            plan.resumed.append(run)
        elif state == RunState.PRUNED.value:
            plan.skipped[name] = "pruned (--resume-pruned to train it on)"
        elif state in DONE_STATES:
            plan.skipped[name] = "finished"
        elif busy:
            plan.skipped[name] = f"running as job {job}"
        else:
            plan.submit.append(run)
    return plan


def write_sweep(plan: SweepPlan, force: bool, reason: str = "queued") -> None:
    """Write sweep.json and the config.yaml of every run to submit (cleared first with ``force``) with the records
    of how it was made (rlscale.train.records), and mark those runs pending with ``reason``."""
    if plan.resumed:
        resume_pruned(plan.sweep_dir, plan.record, plan.pruning or PruningConfig())
    for run in plan.submit:
        if force:
            clear_run(run.run_dir)
            (run.run_dir / PRUNE_REQUEST).unlink(missing_ok=True)
        write_config(run)
        write_records(run.run_dir, run.overrides)
        write_status(run.run_dir, RunState.PENDING, reason)
    write_record(plan.sweep_dir, plan.record)


def write_scripts(plan: SweepPlan, root: Path) -> Tuple[List[Path], List[Path]]:
    """``<root>/<sweep>/<run>.sbatch`` for every run of the sweep, and the scripts of that folder that no run
    of the sweep has any more (an earlier dry run's), removed: (written, removed)."""
    paths = []
    for run in plan.runs:
        path = script_path(plan.spec.name, run.run.name, root)
        atomic_write_text(path, render_sbatch(run, plan.spec.name))
        path.chmod(0o755)
        paths.append(path)
    stale = sorted(set(Path(root, plan.spec.name).glob("*.sbatch")) - set(paths))
    for path in stale:
        path.unlink(missing_ok=True)
    return paths, stale


def submit_sweep(plan: SweepPlan) -> Dict[str, str]:
    """Submit the planned runs and record their job ids in sweep.json. When the launcher refuses (sbatch
    fails, the local executor cannot start), the runs it did not take are marked failed with the reason
    and ``SubmissionFailed`` says it in one line: no run stays queued for a job that does not exist."""
    jobs: Dict[str, str] = {}
    try:
        submit(plan.record.launcher, plan.submit, plan.sweep_dir, jobs, plan.rungs)
    except Exception as err:  # whatever the launcher raised, the sweep's state must say it
        reason = f"submission failed: {type(err).__name__}: {' '.join(str(err).split())}"[:500]
        for run in plan.submit:
            if run.run.name not in jobs:
                write_status(run.run_dir, RunState.FAILED, reason)
        raise SubmissionFailed(f"{plan.sweep_dir}: {reason}; the runs not submitted are marked failed") from None
    finally:
        plan.record.jobs.update(jobs)
        write_record(plan.sweep_dir, plan.record)
    return jobs

