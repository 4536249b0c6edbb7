"""ETAs of runs and sweeps from measured times, read from metrics.jsonl (rlscale.train.loop): a run's start-up (the
first train line's ``startup_s``: model load, engines, warm-up with its compilation, and the step-0 eval, whose
own ``eval_s`` it holds), its seconds per update (``step_seconds``) and per eval (``eval_s``).

A running run's time left: its updates left at its own recent seconds per update plus its evals left at its own
recent seconds per eval (the sweep's until it has one); while it warms up (no train line yet), the sweep's
start-up less the seconds it has been running, then a whole run at the sweep's rates. A pending run: a whole run, start-up
included. A local lane (one job training its runs in turn, in the sweep's order) pays the warm-up once: its
later runs start in the process that already compiled, so they count start-up as the step-0 eval alone (their
measured warm-up, once one is). The sweep's ETA is its longest lane; a sweep whose runs are jobs of their own
(SLURM) shares the work left among the runs running now. No ETA until some run of the sweep has measured an
update and an eval after step 0.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from rlscale.runfolder.metrics import is_finite_number


@dataclass(frozen=True)
class RunTimes:
    """What one run has measured (None: not yet). ``warmup_s``: its start-up less its step-0 eval. ``timed``: its
    eval lines carry ``eval_s`` (lines written before they did count their evals as taking no time)."""

    warmup_s: Optional[float] = None
    update_s: Optional[float] = None
    eval_s: Optional[float] = None
    timed: bool = False


RECENT_UPDATES, RECENT_EVALS = 10, 3  # the rates of the last ones: a machine's load changes during a run


def run_times(records: Sequence[dict]) -> RunTimes:
    """The measured phases of a run's metrics lines: the last start or resume's start-up, the mean seconds of the
    last RECENT_UPDATES updates and of the last RECENT_EVALS evals after step 0."""
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval" and is_finite_number(r.get("eval_s"))]
    updates = [r["step_seconds"] for r in train if is_finite_number(r.get("step_seconds"))]
    startups = [r["startup_s"] for r in train if is_finite_number(r.get("startup_s"))]
    first_eval = next((r["eval_s"] for r in evals if r.get("step") == 0), 0.0)
    later = [r["eval_s"] for r in evals if r.get("step") != 0]
    return RunTimes(warmup_s=max(0.0, startups[-1] - first_eval) if startups else None,
                    update_s=statistics.fmean(updates[-RECENT_UPDATES:]) if updates else None,
                    eval_s=statistics.fmean(later[-RECENT_EVALS:]) if later else None, timed=bool(evals))


@dataclass(frozen=True)
class Plan:
    """A run's schedule: updates in all, evals every ``eval_every`` updates and at the last (and at step 0)."""

    max_steps: int
    eval_every: int

    def evals_after(self, step: int) -> int:
        """Evals still to come after ``step`` (the step-0 eval not counted)."""
        if step >= self.max_steps:
            return 0
        done = step // self.eval_every
        return self.max_steps // self.eval_every - done + (self.max_steps % self.eval_every != 0)


@dataclass(frozen=True)
class SweepRates:
    """The sweep's measured means: warm-up of a lane's first run (``cold_s``) and of a later one (``warm_s``), seconds
    per update and per eval."""

    cold_s: float
    warm_s: float
    update_s: float
    eval_s: float

    def whole_run(self, plan: Plan, cold: bool) -> float:
        """A run from its start: warm-up, the step-0 eval, its updates and its later evals."""
        return ((self.cold_s if cold else self.warm_s) + self.eval_s + plan.max_steps * self.update_s
                + plan.evals_after(0) * self.eval_s)


def sweep_rates(times: Sequence[RunTimes], first_in_lane: Sequence[bool]) -> Optional[SweepRates]:
    """The means over the runs that measured each phase; None until an update and a later eval are measured (evals
    count 0 s in a sweep whose lines carry no ``eval_s``). A later run's warm-up is 0 until one is measured."""
    updates = [t.update_s for t in times if t.update_s is not None]
    evals = [t.eval_s for t in times if t.eval_s is not None] or ([] if any(t.timed for t in times) else [0.0])
    if not updates or not evals:
        return None
    cold = [t.warmup_s for t, first in zip(times, first_in_lane) if first and t.warmup_s is not None]
    warm = [t.warmup_s for t, first in zip(times, first_in_lane) if not first and t.warmup_s is not None]
    return SweepRates(cold_s=statistics.fmean(cold) if cold else statistics.fmean(warm) if warm else 0.0,
                      warm_s=statistics.fmean(warm) if warm else 0.0,
                      update_s=statistics.fmean(updates), eval_s=statistics.fmean(evals))


@dataclass(frozen=True)
class EtaInput:
    """One run as the ETAs see it: its lane (job id, or its own name), state, step, schedule, measured times and,
    while it runs, the seconds since it started."""

    lane: str
    state: str
    step: Optional[int]
    plan: Optional[Plan]
    times: RunTimes
    running_s: Optional[float] = None


UNFINISHED = ("running", "pending", "preempted")


def time_left(run: EtaInput, rates: Optional[SweepRates], cold: bool) -> Optional[float]:
    """Seconds until ``run`` ends (0 for a finished run; None without a schedule or, while nothing is measured,
    for a run that has not measured its own update and eval)."""
    if run.state not in UNFINISHED:
        return 0.0
    if run.plan is None:
        return None
    update = run.times.update_s
    evaluate = run.times.eval_s if run.times.eval_s is not None else rates.eval_s if rates else None
    if run.state == "running" and run.times.update_s is not None and evaluate is not None:
        step = run.step or 0
        return max(0, run.plan.max_steps - step) * update + run.plan.evals_after(step) * evaluate
    if rates is None:
        return None
    whole = rates.whole_run(run.plan, cold)
    if run.state == "running" and run.running_s is not None:  # warming up: the start-up spent so far is behind it
        startup = (rates.cold_s if cold else rates.warm_s) + rates.eval_s
        return whole - min(startup, run.running_s)
    return whole


def etas(runs: Sequence[EtaInput]) -> Tuple[List[Optional[float]], Optional[float]]:
    """(each run's seconds left, or None; the sweep's seconds left, or None): module docstring. ``runs`` are
    the runs of one sweep in its order."""
    firsts: Dict[str, int] = {}
    for i, run in enumerate(runs):
        firsts.setdefault(run.lane, i)
    first_in_lane = [firsts[run.lane] == i for i, run in enumerate(runs)]
    rates = sweep_rates([run.times for run in runs], first_in_lane)
    lefts = [time_left(run, rates, first) for run, first in zip(runs, first_in_lane)]
    unfinished = [i for i, run in enumerate(runs) if run.state in UNFINISHED]
    if not unfinished or any(lefts[i] is None for i in unfinished):
        return lefts, None
    lanes: Dict[str, List[float]] = defaultdict(list)
    for i in unfinished:
        lanes[runs[i].lane].append(lefts[i])
    if len(firsts) < len(runs):  # lanes that train several runs in turn
        return lefts, max(sum(lane) for lane in lanes.values())
    running = sum(runs[i].state == "running" for i in unfinished)
    return lefts, sum(lefts[i] for i in unfinished) / max(1, running)
