"""The body of a sweep job: train (or resume) one or several run directories in turn.

A SLURM array task holds one run; a local job holds one lane of runs (the local executor runs as many
lanes as the machine has cores). The job is a ``submitit.helpers.Checkpointable``: when SLURM (or the
local executor) signals the end of its time or a preemption, submitit calls ``checkpoint()``, which marks
the current run preempted and resubmits this same job. A requeued job (submitit's, or ``scontrol
requeue``) skips the runs that ended done or diverged and trains the others again: the trainer resumes
each from its last checkpoint in the run directory. Failed runs are retried too, since a run killed on
its way down (SIGTERM reaching its worker processes) may have recorded itself failed.

With pruning rungs (a local lane of a pruned sweep, rlscale.sweep.prune), the lane trains each of its runs
to the first rung, waits until the rung is decided (taking the decision itself when every run of the sweep
has reached it), then to the next rung, and so on; a run with a prune request is marked pruned and skipped.

A job of several tasks (``launcher.nodes`` x ``launcher.tasks_per_node`` trainer ranks, rlscale.train.ranks)
runs this body in every task. Task 0 decides as above and owns the run folders (lock, status, metrics,
checkpoints); before each run it trains it tells the other tasks which one through a ``JobChannel``, and
they follow that run's learner calls. A run that ends failed or busy ends the job, since the other ranks may
be waiting in a collective that only task 0's exit releases; a requeued job restarts every task and the
run resumes from task 0's checkpoint (which holds every rank's optimizer shard).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Dict, Optional, Tuple

import submitit

from rlscale.runfolder import RunState, read_status, write_status
from rlscale.runfolder.lock import FolderBusy
from rlscale.runfolder.status import prune_request
from rlscale.train.ranks import JobRanks, export_job_ranks

log = logging.getLogger("rlscale.sweep.job")

FINISHED = (RunState.DONE.value, RunState.DIVERGED.value, RunState.PRUNED.value)
RELEASED = (*FINISHED, RunState.PENDING.value)  # states in which rank 0 has released the other ranks
CHANNEL_TIMEOUT = timedelta(minutes=10)  # for every task to join the channel, and to read a message


@dataclass
class RunJob(submitit.helpers.Checkpointable):
    """Train ``run_dirs`` one after the other with ``threads`` CPU threads. A run that crashes is marked
    failed and the job goes on with the next (a multi-task job ends there instead); the job raises at the end
    if any run failed."""

    run_dirs: Tuple[Path, ...]
    threads: int = 1
    current: Optional[Path] = None
    rungs: Tuple[float, ...] = ()
    sweep_dir: Optional[Path] = None

    def __call__(self) -> Dict[str, str]:
        from rlscale.sweep.prune import wait_for_rung

        ranks = export_job_ranks()
        channel = JobChannel(ranks) if ranks.world_size > 1 else None
        if channel is not None and not ranks.leader:
            return self._follow(channel)
        states: Dict[str, str] = {}
        for index, fraction in enumerate((*self.rungs, None)):
            for run_dir in self.run_dirs:  # a run that failed or was busy in this job is not retried by it
                if not states.get(run_dir.name, "").startswith((RunState.FAILED.value, "busy")):
                    states[run_dir.name] = self._train(run_dir, fraction, channel)
            if fraction is not None:
                wait_for_rung(self.sweep_dir, index)
        self.current = None
        if channel is not None:
            channel.announce(None)
        failed = sorted(name for name, state in states.items() if state == RunState.FAILED.value
                        or state.startswith("busy"))
        if failed:
            raise RuntimeError(f"failed runs: {', '.join(failed)} (see their status.json)")
        return states

    def _train(self, run_dir: Path, fraction: Optional[float], channel: Optional["JobChannel"] = None) -> str:
        """Train one run to the rung ``fraction`` of its steps (None: to the end); its state after. With a
        ``channel`` (task 0 of a multi-task job) the other tasks are told the run first."""
        from rlscale.sweep.prune import rung_of
        from rlscale.train.entry import train_run_dir

        state = read_status(run_dir)["state"]
        request = prune_request(run_dir)
        if request is not None and state not in FINISHED:
            write_status(run_dir, RunState.PRUNED, str(request.get("reason", "pruned by its sweep")))
            return RunState.PRUNED.value
        if state in FINISHED:  # done, diverged or pruned before a requeue of this job: keep the result
            return state
        self.current = run_dir
        _limit_threads(self.threads)  # per run: a PipelineRL run splits the budget it finds
        if channel is not None:
            channel.announce(run_dir)
        try:
            if fraction is None:
                state = train_run_dir(run_dir)
            else:
                state = train_run_dir(run_dir, stop_at=rung_of(run_dir, fraction))
        except FolderBusy as err:  # another process trains it: leave its status.json alone
            state = f"busy: {err}"
        except Exception as err:  # one crashing run never stops the others
            write_status(run_dir, RunState.FAILED, f"{type(err).__name__}: {' '.join(str(err).split())}")
            state = RunState.FAILED.value
        if channel is not None and state not in RELEASED:
            raise RuntimeError(f"{run_dir.name} ended {state.split(':')[0]} (see its status.json); the other ranks "
                               "of this job end with it")
        return state

    def _follow(self, channel: "JobChannel") -> Dict[str, str]:
        """Tasks > 0 of a multi-task job: follow every run task 0 trains, until it says the job is over."""
        from rlscale.config import load_run_config, typed
        from rlscale.train.loop import train

        states: Dict[str, str] = {}
        while (run_dir := channel.receive()) is not None:
            _limit_threads(self.threads)
            states[run_dir.name] = train(typed(load_run_config(run_dir / "config.yaml")), run_dir)
        return states

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on the timeout/preemption signal, before the job is requeued."""
        if self.current is not None:
            write_status(self.current, RunState.PREEMPTED, "signalled; requeued, resumes from its last checkpoint")
        return super().checkpoint(*args, **kwargs)


def _limit_threads(threads: int) -> None:
    """One job per core on a shared machine: cap torch's and the BLAS pools' threads."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)


class JobChannel:
    """Task 0 of a multi-task job tells the other tasks which run it trains next (or that the job is over)
    through a TCP key-value store it hosts beside the process group (``MASTER_PORT + 1``). Every message
    waits for the other tasks to read it. The other tasks watch the store from a thread and exit at once when
    task 0 is gone before the job is over, wherever they wait (a collective, the process group's
    rendezvous), so a job whose task 0 died never outlives it."""

    def __init__(self, ranks: JobRanks):
        self.ranks = ranks
        self.sent = 0
        self.over = False
        self.store = self._connect()
        if not ranks.leader:
            threading.Thread(target=self._watch, name="rlscale-task0-watch", daemon=True).start()

    def _connect(self):
        from torch.distributed import TCPStore

        return TCPStore(self.ranks.master_addr, self.ranks.master_port + 1, self.ranks.world_size,
                        self.ranks.leader, timeout=CHANNEL_TIMEOUT)

    def _watch(self) -> None:
        store = self._connect()  # a connection of its own: the main thread reads messages on the other
        try:
            while not self.over:
                store.check(["alive"])
                time.sleep(1.0)
        except Exception as err:  # task 0's store is gone: so is task 0
            if not self.over:
                log.error("rank %d: task 0 of this job is gone (%s); exiting", self.ranks.rank,
                          " ".join(str(err).split())[:200])
                os._exit(1)

    def announce(self, run_dir: Optional[Path]) -> None:
        """Task 0: the next run (None: the job is over), once every other task has read it."""
        key = f"message/{self.sent}"
        self.store.set(key, json.dumps(None if run_dir is None else str(run_dir)))
        deadline = time.monotonic() + CHANNEL_TIMEOUT.total_seconds()
        while self.store.add(f"{key}/read", 0) < self.ranks.world_size - 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job channel: ranks did not read message {self.sent} within "
                                   f"{CHANNEL_TIMEOUT.total_seconds():.0f} s")
            time.sleep(0.2)
        self.sent += 1

    def receive(self) -> Optional[Path]:
        """Tasks > 0: the next run task 0 trains, None when the job is over. Waits as long as task 0 lives
        (it may wait for a pruning rung between runs)."""
        key = f"message/{self.sent}"
        while not self.store.check([key]):
            time.sleep(0.2)
        message = json.loads(self.store.get(key))
        self.over = message is None
        self.store.add(f"{key}/read", 1)
        self.sent += 1
        return None if message is None else Path(message)
