"""The NVIDIA GPUs of this machine, whatever the current process may see: the lanes of ``launcher=local``
are dealt from them, and ``engine.device=auto`` refuses to fall back to CPU while they exist but are hidden.

Counted from the driver (``/proc/driver/nvidia/gpus``, else ``nvidia-smi -L``); ``RLSCALE_GPUS=N`` overrides
the count (GPUs 0..N-1), e.g. to see the dealing of lanes on a machine without GPUs.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
