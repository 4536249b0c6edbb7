"""The trainer ranks of one run's job: a run spread over ``launcher.nodes`` x ``launcher.tasks_per_node``
processes (data parallel under DeepSpeed ZeRO; rank 0 runs the loop and owns the run folder, the other ranks
follow its learner calls, ``rlscale.engines.learners.deepspeed_learner``).

Each task of a multi-task job learns its place from submitit's job environment: a task of a submitit job
(local or SLURM executor) reads submitit's own variables, a task of a plain SLURM step (``srun python -m
rlscale.train RUN_DIR`` in a generated sbatch script) is read through submitit's SLURM job environment
(``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, the first host of ``SLURM_JOB_NODELIST``).
``submitit.helpers.TorchDistributedEnvironment`` then exports torch's env:// variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``). It never narrows
``CUDA_VISIBLE_DEVICES``: a rank sees the job's GPUs of its node and takes the one of its local rank.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class JobRanks:
    """This process's place among the run's trainer ranks."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    tasks_per_node: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = 0

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def nodes(self) -> int:
        return self.world_size // self.tasks_per_node


SINGLE = JobRanks()


def _in_slurm_step() -> bool:
    """A task of a SLURM step with several tasks, outside a submitit job."""
    return "SUBMITIT_EXECUTOR" not in os.environ and "SLURM_PROCID" in os.environ \
        and int(os.environ.get("SLURM_NTASKS", "1")) > 1


def export_job_ranks() -> JobRanks:
    """Export torch's distributed environment when this process is one task of a job with several (a
    submitit job or a SLURM step) and return its place; a single task exports nothing and is ``SINGLE``."""
    if _in_slurm_step():
        os.environ["SUBMITIT_EXECUTOR"] = "slurm"  # read the step's SLURM variables as submitit's job environment
    if "SUBMITIT_EXECUTOR" not in os.environ:
        return SINGLE
    from submitit import JobEnvironment
    from submitit.helpers import TorchDistributedEnvironment

    if JobEnvironment().num_tasks < 2:
        return SINGLE
    env = TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    return JobRanks(env.rank, env.world_size, env.local_rank, env.local_world_size, env.master_addr,
                    env.master_port)
