"""How ``launcher=local`` deals a sweep's runs into lanes (one submitit local job each, running its runs in
turn).

On a machine with GPUs a lane holds ``launcher.gpus_per_node`` of them (at least one; PipelineRL wants two,
a trainer and a generator GPU) and sees only its own: its GPU indices go to submitit's LocalExecutor as
``visible_gpus``, which sets the job's ``CUDA_VISIBLE_DEVICES``. Lanes are then counted by GPUs. Without GPUs
lanes are counted by usable cores. ``launcher.max_parallel`` caps either count; each lane gets an equal share
of the cores as torch threads. A lane of a run over several trainer ranks (``launcher.tasks_per_node``) is one
job of that many tasks: on GPUs it holds at least one GPU per rank, on CPU one core per rank (each rank gets
its share of the lane's threads).

The GPUs dealt are those of ``CUDA_VISIBLE_DEVICES`` when it is set, else those the NVIDIA driver lists
(``rlscale.gpus``; ``RLSCALE_GPUS=N`` overrides: GPUs 0..N-1, e.g. to see the dealing on a machine without
GPUs).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Tuple

from rlscale.sweep.launchers import LocalConfig
from rlscale.gpus import driver_gpu_count, gpu_count_override


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine_gpus() -> Tuple[int, ...]:
    """The GPU indices a local job may be given: ``CUDA_VISIBLE_DEVICES`` when set, else 0..n-1 for the n GPUs
    of ``driver_gpu_count``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or gpu_count_override():
        return tuple(range(driver_gpu_count()))
    ids = [part.strip() for part in visible.split(",") if part.strip()]
    if not all(part.isdigit() for part in ids):
        raise ValueError(f"CUDA_VISIBLE_DEVICES='{visible}': launcher=local deals GPUs by index; list indices, "
                         "not UUIDs")
    return tuple(int(part) for part in ids)


@dataclass(frozen=True)
class Lane:
    """The runs (indices into the sweep's run list) one local job trains in turn, its GPUs, its tasks (the
    trainer ranks of each run) and each task's threads."""

    runs: Tuple[int, ...]
    gpus: Tuple[int, ...]
    threads: int
    tasks: int = 1

    def executor_parameters(self) -> dict:
        """submitit LocalExecutor parameters: the job sees exactly ``gpus`` (none: ``CUDA_VISIBLE_DEVICES=''``)
        and runs ``tasks`` processes."""
        return {"gpus_per_node": len(self.gpus), "visible_gpus": self.gpus, "tasks_per_node": self.tasks}


def deal_lanes(n_runs: int, launcher: LocalConfig, gpus: Tuple[int, ...], cores: int) -> List[Lane]:
    """Runs dealt round-robin into lanes: one per ``launcher.gpus_per_node`` GPUs (at least
    ``launcher.tasks_per_node``) when there are GPUs, else one per ``launcher.tasks_per_node`` cores; at most
    ``launcher.max_parallel`` and at most one per run."""
    tasks = launcher.tasks_per_node
    per_lane = max(1, launcher.gpus_per_node, tasks)
    if gpus:
        if per_lane > len(gpus):
            field_name = "gpus_per_node" if per_lane == launcher.gpus_per_node else "tasks_per_node"
            raise ValueError(f"launcher.{field_name}={getattr(launcher, field_name)}: this machine shows {len(gpus)} "
                             f"GPU(s) ({', '.join(map(str, gpus))})")
        capacity = len(gpus) // per_lane
    else:
        capacity = max(1, cores // tasks)
    limit = launcher.max_parallel or capacity
    lanes = max(1, min(n_runs, min(limit, capacity) if gpus else limit))
    return [Lane(runs=tuple(range(n_runs))[i::lanes], gpus=gpus[i * per_lane:(i + 1) * per_lane] if gpus else (),
                 threads=max(1, cores // (lanes * tasks)), tasks=tasks)
            for i in range(lanes)]
