"""What a signalled ``rlscale sweep`` does with what it started (rlscale.sweep.interrupt takes the signal):
stop a foreground sweep's local lanes as ``rlscale cancel`` does, their unfinished runs marked failed
(interrupted) so a rerun resumes them, or say that detached lanes and SLURM jobs go on; one line either way."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

from rlscale.sweep.cancel import cancel_jobs
from rlscale.sweep.interrupt import Interrupted


def interrupted_reason(stop: Interrupted) -> str:
    """The reason written into the status.json of a run the sweep stopped."""
    return f"interrupted ({stop.name} to rlscale sweep); rerun the sweep to resume it from its last checkpoint"


def stop_line(stop: Interrupted, sweep_dir: Optional[Path], launcher: Optional[str], jobs: Dict[str, str],
              detach: bool) -> str:
    """What the sweep does on ``stop``, in one line: stop its local lanes (foreground), or say that its jobs
    go on. ``jobs``: the runs this command submitted, with their job ids (empty: nothing submitted)."""
    if sweep_dir is None or not jobs:
        return f"interrupted ({stop.name}) before this command submitted any run; nothing it started runs"
    if launcher == "local" and not detach:
        done = cancel_jobs(sweep_dir, reason=interrupted_reason(stop), only=set(jobs.values()))
        runs = ", ".join(sorted(path.name for path in done.runs)) or "none"
        lanes = len(done.jobs.get("local", []))
        return (f"interrupted ({stop.name}): stopped {lanes} lane(s) of {sweep_dir}; unfinished runs marked failed "
                f"(interrupted): {runs}; rerun the same command to resume them from their last checkpoints")
    ids = sorted(set(jobs.values()))
    return (f"interrupted ({stop.name}): the {len(ids)} {launcher} job(s) of {sweep_dir} go on; follow with "
            f"rlscale status {sweep_dir}, stop with rlscale cancel {sweep_dir}, resume by rerunning the same command")
