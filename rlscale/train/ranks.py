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
from typing import Optional, Tuple


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


JOB_TASKS_ENV = "RLSCALE_JOB_TASKS"  # "tasks,tasks per node,generator tasks" of the job, before the split


def split_generator_tasks(generator_tasks: int) -> Optional[int]:
    """Split the job's tasks between trainer ranks and ``launcher.generator_tasks`` generator tasks (the job's last
    ones, ``rlscale.train.offpolicy.pipeline_remote``). A generator task gets its index among them; a trainer rank
    gets None, with torch's ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` narrowed to the trainer ranks (of the job, of
    its node), so the trainers' process group leaves the generator tasks out. The job's own counts are kept in
    ``RLSCALE_JOB_TASKS`` (the split is made once, however often it is asked for)."""
    if generator_tasks < 1 or "RANK" not in os.environ:
        return None
    if JOB_TASKS_ENV not in os.environ:
        os.environ[JOB_TASKS_ENV] = ",".join((os.environ["WORLD_SIZE"], os.environ.get("LOCAL_WORLD_SIZE",
                                                                                        os.environ["WORLD_SIZE"]),
                                              str(generator_tasks)))
    tasks, per_node, _ = (int(value) for value in os.environ[JOB_TASKS_ENV].split(","))
    trainers = tasks - generator_tasks
    rank = int(os.environ["RANK"])
    if rank >= trainers:
        return rank - trainers
    first_of_node = rank - int(os.environ.get("LOCAL_RANK", "0"))
    os.environ["WORLD_SIZE"] = str(trainers)
    os.environ["LOCAL_WORLD_SIZE"] = str(min(per_node, trainers - first_of_node))
    return None


def job_tasks() -> Tuple[int, int, int]:
    """(tasks, tasks per node, generator tasks) of this process's job: (1, 1, 0) for a single process."""
    if JOB_TASKS_ENV in os.environ:
        tasks, per_node, generators = (int(value) for value in os.environ[JOB_TASKS_ENV].split(","))
        return tasks, per_node, generators
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return world, int(os.environ.get("LOCAL_WORLD_SIZE", str(world))), 0
