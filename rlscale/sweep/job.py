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
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

import submitit

from rlscale.results import RunState, read_status, write_status
from rlscale.results.lock import FolderBusy
from rlscale.results.status import prune_request

FINISHED = (RunState.DONE.value, RunState.DIVERGED.value, RunState.PRUNED.value)


@dataclass
class RunJob(submitit.helpers.Checkpointable):
    """Train ``run_dirs`` one after the other with ``threads`` CPU threads. A run that crashes is marked
    failed and the job goes on with the next; the job raises at the end if any run failed."""

    run_dirs: Tuple[Path, ...]
    threads: int = 1
    current: Optional[Path] = None
    rungs: Tuple[float, ...] = ()
    sweep_dir: Optional[Path] = None

    def __call__(self) -> Dict[str, str]:
        from rlscale.sweep.prune import wait_for_rung

        states: Dict[str, str] = {}
        for index, fraction in enumerate((*self.rungs, None)):
            for run_dir in self.run_dirs:  # a run that failed or was busy in this job is not retried by it
                if not states.get(run_dir.name, "").startswith((RunState.FAILED.value, "busy")):
                    states[run_dir.name] = self._train(run_dir, fraction)
            if fraction is not None:
                wait_for_rung(self.sweep_dir, index)
        self.current = None
        failed = sorted(name for name, state in states.items() if state == RunState.FAILED.value
                        or state.startswith("busy"))
        if failed:
            raise RuntimeError(f"failed runs: {', '.join(failed)} (see their status.json)")
        return states

    def _train(self, run_dir: Path, fraction: Optional[float]) -> str:
        """Train one run to the rung ``fraction`` of its steps (None: to the end); its state after."""
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
        try:
            if fraction is None:
                return train_run_dir(run_dir)
            return train_run_dir(run_dir, stop_at=rung_of(run_dir, fraction))
        except FolderBusy as err:  # another process trains it: leave its status.json alone
            return f"busy: {err}"
        except Exception as err:  # one crashing run never stops the others
            write_status(run_dir, RunState.FAILED, f"{type(err).__name__}: {' '.join(str(err).split())}")
            return RunState.FAILED.value

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
