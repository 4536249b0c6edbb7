"""The status of a sweep's runs (what ``rlscale status`` shows), read from their run directories (status.json,
metrics.jsonl) and from the liveness of their jobs: state, last step, latest validation reward (the R_C of
Eq. 1) and an ETA from the measured start-up, update and eval times of the run and its sweep (rlscale.sweep.eta)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from omegaconf import OmegaConf

from rlscale.runfolder import find_runs, read_metrics, read_status
from rlscale.runfolder.metrics import is_finite_number
from rlscale.runfolder.status import STATUS_JSON
from rlscale.runfolder.process import host, pid_alive
from rlscale.sweep.dispatch import alive
from rlscale.sweep.eta import EtaInput, Plan, etas, run_times
from rlscale.sweep.spec import SpecError
from rlscale.sweep.state import SWEEP_JSON, read_record, run_path

FINAL_STATES = ("done", "diverged", "failed", "pruned")
LOST = "lost"


@dataclass(frozen=True)
class RunRef:
    """A run to watch: its sweep, folder name, directory and launcher job (if one was submitted)."""

    sweep: str
    run: str
    run_dir: Path
    job: Optional[str] = None


@dataclass(frozen=True)
class RunProgress:
    """One row of the progress table. ``state`` is status.json's, or ``lost`` when the run is unfinished
    and its job no longer exists (rerun the sweep to resubmit it). ``job_alive``: its job is queued or
    running (a local lane may still run other runs). ``last_metrics``: the finite numbers of the last train and
    the last eval line, by kind (``rlscale status --json``)."""

    ref: RunRef
    state: str
    reason: str
    step: Optional[int]
    max_steps: Optional[int]
    val_reward: Optional[float]
    eta_s: Optional[float]
    job_alive: bool = False
    last_metrics: Dict[str, Dict[str, float]] = field(default_factory=dict)
    timing: Optional[EtaInput] = None

    @property
    def finished(self) -> bool:
        """Nothing will change any more: the run ended and its job is gone, or the run was lost."""
        return (self.state in FINAL_STATES and not self.job_alive) or self.state == LOST


def process_gone(status: dict) -> bool:
    """Whether the process that wrote a "running" status.json (its pid, on this host) has ended. A run
    on another host is left to its launcher's job state (SLURM)."""
    pid = status.get("pid")
    if status.get("host") != host() or not isinstance(pid, int):
        return False
    since = status.get("time")
    return not pid_alive(pid, since if isinstance(since, (int, float)) else None)


def _plan(run_dir: Path) -> Optional[Plan]:
    """The run's updates and eval interval, from its config.yaml."""
    try:
        trainer = OmegaConf.load(run_dir / "config.yaml").trainer
        return Plan(max_steps=int(trainer.max_steps), eval_every=int(trainer.get("eval_every", 6)))
    except Exception:  # a missing or partial config only costs the ETA
        return None


def last_lines(records: List[dict]) -> Dict[str, Dict[str, float]]:
    """The finite numbers (step included) of the last line of each kind, e.g. ``{"train": {...}, "eval": {...}}``."""
    last: Dict[str, Dict[str, float]] = {}
    for record in records:
        last[str(record.get("kind"))] = {key: value for key, value in record.items() if is_finite_number(value)}
    return last


def run_progress(ref: RunRef, live_jobs: Set[str], now: Optional[float] = None) -> RunProgress:
    """The row of one run; its ETA is the sweep's business (``collect``). ``now``: the wall clock (time.time)."""
    status = read_status(ref.run_dir)
    state, reason = str(status.get("state")), str(status.get("reason", ""))
    if state not in FINAL_STATES and ref.job and ref.job not in live_jobs and state != "unknown":
        state, reason = LOST, f"job {ref.job} ended while the run was {state}"
    elif state == "running" and process_gone(status):
        state, reason = "failed", (f"process {status['pid']} gone (killed?); resume with: rlscale run --run-dir "
                                   f"{ref.run_dir}")
    records, _ = read_metrics(ref.run_dir / "metrics.jsonl") if (ref.run_dir / "metrics.jsonl").exists() else ([], [])
    step = max((r["step"] for r in records if isinstance(r.get("step"), int)), default=None)
    evals = [r for r in records if r.get("kind") == "eval" and is_finite_number(r.get("val_reward"))]
    val_reward = evals[-1]["val_reward"] if evals else None
    plan = _plan(ref.run_dir)
    since = status.get("time") if state == "running" else None
    now = time.time() if now is None else now
    timing = EtaInput(lane=ref.job or str(ref.run_dir), state=state, step=step, plan=plan, times=run_times(records),
                      running_s=max(0.0, now - since) if is_finite_number(since) else None)
    return RunProgress(ref=ref, state=state, reason=reason, step=step, max_steps=plan.max_steps if plan else None,
                       val_reward=val_reward, eta_s=None, job_alive=bool(ref.job) and ref.job in live_jobs,
                       last_metrics=last_lines(records), timing=timing)


def with_etas(rows: Sequence[RunProgress]) -> List[RunProgress]:
    """``rows`` with each running run's seconds left (rlscale.sweep.eta), the runs of each sweep taken together."""
    out = list(rows)
    for members in by_sweep(out).values():
        lefts, _ = etas([out[i].timing for i in members])
        for i, left in zip(members, lefts):
            if out[i].state == "running":
                out[i] = replace(out[i], eta_s=left)
    return out


def by_sweep(rows: Sequence[RunProgress]) -> Dict[str, List[int]]:
    """The indices of the rows that carry ETA inputs, by sweep, in their order."""
    groups: Dict[str, List[int]] = {}
    for i, row in enumerate(rows):
        if row.timing is not None:
            groups.setdefault(row.ref.sweep, []).append(i)
    return groups


def refs_under(root: Path) -> List[Tuple[RunRef, str]]:
    """Every run under ``root`` (a results root, a sweep folder or a run folder) with its launcher: the runs
    listed by each sweep.json (so runs not started yet show too), then run folders outside any sweep, those
    still starting (a status.json, no metrics yet) included."""
    root = Path(root)
    refs: List[Tuple[RunRef, str]] = []
    for path in sorted(root.rglob(SWEEP_JSON)):
        record = read_record(path.parent)
        refs += [(RunRef(sweep=record.name, run=v.run, run_dir=run_path(path.parent, v), job=record.jobs.get(v.run)),
                  record.launcher) for v in record.variants]
    seen = {ref.run_dir.resolve() for ref, _ in refs}
    for run_dir in sorted({run.path for run in find_runs(root)} | set(_started_runs(root))):
        if run_dir.resolve() not in seen:
            refs.append((RunRef(sweep=run_dir.parent.name if run_dir != root else "", run=run_dir.name,
                                run_dir=run_dir), "local"))
    return refs


def _started_runs(root: Path) -> List[Path]:
    """Run folders that have a status.json but no metrics line yet (a run starting: loading its model,
    warming up), outside checkpoints."""
    return [status.parent for status in root.rglob(STATUS_JSON)
            if "checkpoints" not in status.parent.relative_to(root).parts]


def collect(refs: Sequence[Tuple[RunRef, str]]) -> List[RunProgress]:
    """Progress of every run, asking each launcher once which of its jobs are alive (all of them, while
    SLURM does not answer: a watcher waits rather than calling runs lost)."""
    live: Set[str] = set()
    for launcher in {launcher for _, launcher in refs}:
        jobs = [ref.job for ref, l in refs if l == launcher and ref.job]
        try:
            live |= alive(launcher, jobs)
        except SpecError:
            live |= set(jobs)
    now = time.time()
    return with_etas([run_progress(ref, live, now) for ref, _ in refs])
