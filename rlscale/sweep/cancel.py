"""``rlscale cancel``: stop the queued and running jobs of the sweeps under a folder.

SLURM jobs (array tasks included) are cancelled with ``scancel``; a local job (a lane of submitit's local
executor) is killed with every process it started (PipelineRL's generators, DeepSpeed ranks). Once the jobs
are gone, each of their runs that had not finished is marked failed with the reason "cancelled", so
rerunning the same ``rlscale sweep`` resubmits it and the trainer resumes it from its last checkpoint. Runs
that finished, and jobs already gone, are left as they are.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set

from rlscale.runfolder.status import RunState, read_status, write_status
from rlscale.sweep.dispatch import alive
from rlscale.sweep.status import refs_under
from rlscale.sweep.orchestrator import DONE_STATES, FINAL_STATES
from rlscale.sweep.spec import SpecError

CANCELLED = "cancelled (rlscale cancel); rerun the sweep to resume it from its last checkpoint"
WAIT_S = 60.0


@dataclass
class Cancellation:
    """What ``cancel_jobs`` stopped: job ids by launcher, and the runs it marked cancelled."""
    jobs: Dict[str, List[str]] = field(default_factory=dict)
    runs: List[Path] = field(default_factory=list)


def cancel_jobs(root: Path, reason: str = CANCELLED, only: Optional[Set[str]] = None) -> Cancellation:
    """Stop every live job of the sweeps under ``root`` (a results root or a sweep folder), or those of them
    whose ids are in ``only``, and mark their unfinished runs failed with ``reason``. Raises SpecError when
    SLURM cannot be asked or refuses."""
    refs = refs_under(root)
    jobs_of: Dict[str, Set[str]] = {}
    for ref, launcher in refs:
        if ref.job and (only is None or str(ref.job) in only):
            jobs_of.setdefault(launcher, set()).add(str(ref.job))
    done = Cancellation()
    for launcher, jobs in sorted(jobs_of.items()):
        live = alive(launcher, jobs)
        if not live:
            continue
        # judged before the jobs go down: a trainer killed on its way may record itself failed
        unfinished = [ref.run_dir for ref, ref_launcher in refs if ref_launcher == launcher and str(ref.job) in live
                      and read_status(ref.run_dir)["state"] not in FINAL_STATES]
        (_kill_local if launcher == "local" else _scancel)(live)
        _wait_gone(launcher, live)
        done.jobs[launcher] = sorted(live)
        for run_dir in unfinished:
            if read_status(run_dir)["state"] not in DONE_STATES:
                write_status(run_dir, RunState.FAILED, reason)
                done.runs.append(run_dir)
    return done


def _kill_local(pids: Iterable[str]) -> None:
    """SIGKILL each job process and its descendants (children first found, all signalled at once)."""
    targets = set()
    for pid in pids:
        targets |= {int(pid), *_descendants(int(pid))}
    for pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _descendants(pid: int) -> Set[int]:
    """Every process below ``pid``, from the parent ids in /proc."""
    children: Dict[int, List[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _scancel(job_ids: Iterable[str]) -> None:
    ids = sorted(job_ids)
    try:
        subprocess.run(["scancel", *ids], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", None) or err
        raise SpecError(f"scancel {' '.join(ids)}: {' '.join(str(detail).split())}") from None


def _wait_gone(launcher: str, jobs: Set[str]) -> None:
    """Until none of ``jobs`` is alive, so no dying trainer writes its status after the cancellation."""
    deadline = time.monotonic() + WAIT_S
    while alive(launcher, jobs):
        if time.monotonic() > deadline:
            raise SpecError(f"jobs {', '.join(sorted(alive(launcher, jobs)))} still alive {WAIT_S:.0f} s after "
                            "the cancellation")
        time.sleep(0.5)
