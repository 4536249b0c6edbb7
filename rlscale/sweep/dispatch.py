"""Submit a sweep's runs through submitit and ask whether their jobs are still alive.

- ``local``: submitit's local executor. The runs are dealt round-robin into lanes (``rlscale.sweep.lanes``:
  one per ``launcher.gpus_per_node`` GPUs on a GPU machine, each lane seeing only its own, else one per
  usable core; ``launcher.max_parallel`` caps it); each lane is one local job that trains its runs in turn
  with ``cores // lanes`` threads. Job id = the local controller's process id; its logs and results are
  ``.submitit/<id>_<task>_*`` in the sweep folder. A lane starts with SIGINT ignored: a Ctrl-C in the sweep's
  terminal is the sweep's to act on (rlscale.sweep.interrupt).
- ``slurm``: one SLURM job array per distinct launcher config (usually one per sweep), one array task per
  run, ``launcher.array_parallelism`` at a time, with the options of ``rlscale.sweep.sbatch``; each job's logs and
  results are in ``.submitit/<id>/``.
Both jobs run ``RunJob``, which is checkpointable: a job signalled before its limit is requeued. A run over
several trainer ranks is a job of ``launcher.nodes`` x ``launcher.tasks_per_node`` tasks (``RunJob`` runs in
each; a SLURM step is ended whole when one of its tasks exits with an error, ``--kill-on-bad-exit``).
"""
from __future__ import annotations

import getpass
import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import submitit
from omegaconf import OmegaConf

from rlscale.gpus import generator_gpus
from rlscale.sweep.interrupt import sigint_ignored
from rlscale.sweep.job import RunJob
from rlscale.sweep.lanes import Lane, deal_lanes, machine_gpus, usable_cores
from rlscale.sweep.resolve import ResolvedRun
from rlscale.sweep.sbatch import job_tasks, sbatch_options, setup_commands
from rlscale.sweep.spec import SpecError

SUBMITIT_DIR = ".submitit"
SLURM_LIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
              "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT")


def submit(launcher: str, runs: Sequence[ResolvedRun], sweep_dir: Path, jobs: Dict[str, str],
           rungs: Tuple[float, ...] = ()) -> None:
    """Submit ``runs``, adding {run folder name: job id} to ``jobs`` as each job is taken (so a failure
    half-way leaves in ``jobs`` the runs that were submitted). Local lanes pause at the pruning ``rungs``
    (rlscale.sweep.job); SLURM tasks run through and are stopped by prune requests."""
    if not runs:
        return
    folder = Path(sweep_dir) / SUBMITIT_DIR
    if launcher == "local":  # the local controller makes its folder as given: a %j there would stay a literal folder
        _submit_local(runs, folder, jobs, rungs, Path(sweep_dir))
    else:
        _submit_slurm(runs, folder / "%j", jobs)


def _setup_lines(runs: Sequence[ResolvedRun]) -> List[str]:
    return [str(line) for line in setup_commands(runs[0].cfg.launcher)]


def local_lanes(runs: Sequence[ResolvedRun]) -> List[Lane]:
    """The lanes of ``runs`` on this machine; ``SpecError`` naming the field when they cannot be dealt or leave
    PipelineRL's generators no GPU beside the trainer ranks."""
    shapes = sorted({int(r.cfg.launcher.tasks_per_node) for r in runs})
    if len(shapes) > 1:
        raise SpecError(f"field 'launcher.tasks_per_node': launcher=local deals one job shape per sweep, got "
                        f"{' and '.join(map(str, shapes))}; set it for the whole sweep")
    try:
        lanes = deal_lanes(len(runs), runs[0].cfg.launcher, machine_gpus(), usable_cores())
        for run in runs:  # on GPUs (engine.device=auto included) a lane's GPUs must leave some to the generators
            if lanes[0].gpus and run.cfg.engine.device != "cpu" and run.cfg.offpolicy.name == "pipeline":
                generator_gpus(lanes[0].tasks, len(lanes[0].gpus), run.cfg.offpolicy.num_generators)
        return lanes
    except ValueError as err:
        raise SpecError(str(err)) from None


def _submit_local(runs: Sequence[ResolvedRun], folder: Path, jobs: Dict[str, str], rungs: Tuple[float, ...] = (),
                  sweep_dir: Optional[Path] = None) -> None:
    launcher = runs[0].cfg.launcher
    lanes = local_lanes(runs)
    executor = submitit.LocalExecutor(folder=folder)
    for lane in lanes:
        members = [runs[i] for i in lane.runs]
        executor.update_parameters(timeout_min=int(launcher.timeout_min) * len(members),
                                   signal_delay_s=int(launcher.signal_delay_s), setup=_setup_lines(runs),
                                   **lane.executor_parameters())
        with sigint_ignored():  # Ctrl-C is the sweep's to act on (rlscale.sweep.interrupt)
            job = executor.submit(RunJob(run_dirs=tuple(r.run_dir for r in members), threads=lane.threads,
                                         rungs=rungs, sweep_dir=sweep_dir if rungs else None))
        jobs.update({r.run.name: str(job.job_id) for r in members})


def _submit_slurm(runs: Sequence[ResolvedRun], folder: Path, jobs: Dict[str, str]) -> None:
    groups: Dict[str, List[ResolvedRun]] = defaultdict(list)
    for run in runs:  # one array per distinct launcher config
        groups[json.dumps(OmegaConf.to_container(run.cfg.launcher), sort_keys=True)].append(run)
    for members in groups.values():
        launcher = members[0].cfg.launcher
        options = sbatch_options(launcher)
        named = {k: options.pop(k) for k in ("time", "cpus_per_task", "mem", "partition", "account", "qos",
                                              "gpus_per_node", "nodes", "ntasks_per_node") if k in options}
        if job_tasks(launcher) > 1:
            named["srun_args"] = ["--kill-on-bad-exit=1"]
        executor = submitit.SlurmExecutor(folder=folder)
        executor.update_parameters(job_name=f"rlscale-{members[0].cfg.sweep}", stderr_to_stdout=True,
                                   array_parallelism=int(launcher.array_parallelism),
                                   signal_delay_s=int(launcher.signal_delay_s), setup=_setup_lines(members),
                                   additional_parameters=options, **named)
        with executor.batch():
            submitted = [executor.submit(RunJob(run_dirs=(r.run_dir,), threads=int(launcher.cpus_per_task)))
                         for r in members]
        jobs.update({r.run.name: str(job.job_id) for r, job in zip(members, submitted)})


def alive(launcher: str, job_ids: Iterable[str]) -> Set[str]:
    """The subset of ``job_ids`` whose jobs are queued or running; ``SpecError`` when SLURM does not answer."""
    ids = {str(j) for j in job_ids if j}
    if not ids:
        return set()
    return _alive_local(ids) if launcher == "local" else _alive_slurm(ids)


def _alive_local(ids: Set[str]) -> Set[str]:
    live = set()
    for pid in ids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z" and b"submitit" in cmdline:
            live.add(pid)
    return live


def _alive_slurm(ids: Set[str]) -> Set[str]:
    """Ask squeue (array tasks expanded) for this user's jobs."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i %T"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", None) or err
        raise SpecError(f"squeue: cannot tell whether jobs {', '.join(sorted(ids))} are alive: "
                        f"{' '.join(str(detail).split())}") from None
    states = dict(line.split(None, 1) for line in out.splitlines() if " " in line)
    return {j for j in ids if states.get(j, "").strip() in SLURM_LIVE}
