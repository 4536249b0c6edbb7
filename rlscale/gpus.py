"""The NVIDIA GPUs of this machine, whatever the current process may see: the lanes of ``launcher=local``
are dealt from them, and ``engine.device=auto`` refuses to fall back to CPU while they exist but are hidden.

Counted from the driver (``/proc/driver/nvidia/gpus``, else ``nvidia-smi -L``); ``RLSCALE_GPUS=N`` overrides
the count (GPUs 0..N-1), e.g. to see the dealing of lanes on a machine without GPUs. ``generator_gpus`` splits
the GPUs of a run's job between its trainer ranks and PipelineRL's generators.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Tuple

GPU_COUNT_ENV = "RLSCALE_GPUS"
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def gpu_count_override() -> bool:
    return bool(os.environ.get(GPU_COUNT_ENV, "").strip())


def driver_gpu_count() -> int:
    """GPUs the NVIDIA driver lists (0 without a driver), or ``RLSCALE_GPUS``."""
    if gpu_count_override():
        value = os.environ[GPU_COUNT_ENV].strip()
        if not value.isdigit():
            raise ValueError(f"{GPU_COUNT_ENV}='{value}': expected a number of GPUs")
        return int(value)
    if NVIDIA_GPUS.is_dir():
        return sum(1 for _ in NVIDIA_GPUS.iterdir())
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listing.splitlines())


def generator_gpus(trainer_ranks: int, visible: int, generators: int) -> Tuple[int, ...]:
    """The GPU index of each of PipelineRL's ``generators`` on a node of a run's job whose ``visible`` GPUs
    (``launcher.gpus_per_node``) serve ``trainer_ranks`` trainer ranks (``launcher.tasks_per_node``), the
    paper's generator / trainer split (Section 3.1): trainer rank r takes GPU r (its local rank) and the
    generators take GPUs ``trainer_ranks`` .. ``visible`` - 1, round robin. One trainer on one GPU shares it
    with its generators. ``ValueError`` (one line naming ``launcher.gpus_per_node``) when several trainer
    ranks leave no GPU for the generators."""
    spare = tuple(range(trainer_ranks, visible))
    if not spare:
        if trainer_ranks > 1:
            raise ValueError(f"field 'launcher.gpus_per_node': PipelineRL with {trainer_ranks} trainer ranks per node "
                             f"needs GPUs for its generators beyond the trainers' ({trainer_ranks + 1} at least), "
                             f"got {visible}")
        spare = (0,)
    return tuple(spare[g % len(spare)] for g in range(generators))
