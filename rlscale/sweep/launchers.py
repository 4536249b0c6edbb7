"""The config class of each launcher (``launcher=local|slurm``), named by its option
(``rlscale.config.registry.LAUNCHER``): the run's ``launcher`` section is typed by the one its ``name`` picks when the
config is composed, so a SLURM knob beside launcher=local (``launcher.partition``) is refused there. ``LauncherConfig``
holds what both read: the job's shape, which the trainer, the memory estimate and the lanes read too, its time limit
and signal, and the setup lines. Lanes (``rlscale.sweep.lanes``) read ``LocalConfig``; the sbatch options
(``rlscale.sweep.sbatch``) and submitit's arrays (``rlscale.sweep.dispatch``) read ``SlurmConfig``. This module
imports nothing but ``rlscale.knobs``, so composing a config imports no launcher."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from rlscale.knobs import knob

LAUNCHER_NAME = "the launcher (``launcher=NAME``)"


@dataclass
class LauncherConfig:
    """Where sweep variants run, and the shape of one run's job."""

    name: str = knob("local", LAUNCHER_NAME)
    gpus_per_node: int = knob(0, "GPUs per job (local: per lane; 0 there: one)", ge=0)
    nodes: int = knob(1, "nodes of one run's job (more than 1: launcher=slurm); the run's trainer ranks are "
                      "``nodes`` x ``tasks_per_node`` less ``generator_tasks``, data parallel over DeepSpeed ZeRO",
                      gt=0)
    tasks_per_node: int = knob(1, "tasks per node of one run's job: trainer ranks (more than one in all: "
                               "engine.learner=deepspeed; on CUDA at most ``gpus_per_node``, each task on the GPU of "
                               "its local rank), then the generator tasks; rank 0 generates (unless generator tasks "
                               "do), evaluates and writes the run folder, the other ranks share each update", gt=0)
    generator_tasks: int = knob(0, "the job's last tasks that run PipelineRL's generators instead of trainer ranks, "
                                "one generator each (on CUDA on its task's GPU), on any node, e.g. a second node of 8; "
                                "they take the published weights over the network "
                                "(rlscale.train.offpolicy.pipeline_remote). 0: the generators are "
                                "``offpolicy.num_generators`` processes of rank 0, on its node", "Sec. 3.1", ge=0)
    timeout_min: int = knob(60, "time limit of a job in minutes (a local lane: of each of its runs)", gt=0)
    signal_delay_s: int = knob(60, "seconds before the time limit at which a job is signalled; its run is marked "
                               "preempted, requeued and resumes from its checkpoint", gt=0)
    setup: List[str] = knob([], "shell lines run before each job, as written (module load, source a venv, "
                                "export; $VARS expand)")


@dataclass
class LocalConfig(LauncherConfig):
    """submitit's local executor: the lanes of this machine."""

    name: str = knob("local", LAUNCHER_NAME)
    max_parallel: int = knob(0, "runs at once (0 = as many lanes as the machine's GPUs or cores allow)", ge=0)


@dataclass
class SlurmConfig(LauncherConfig):
    """What a SLURM job asks for, beyond its shape (the sbatch options, and submitit's arrays)."""

    name: str = knob("slurm", LAUNCHER_NAME)
    partition: Optional[str] = knob(None, "the SLURM partition")
    account: Optional[str] = knob(None, "the SLURM account")
    qos: Optional[str] = knob(None, "the SLURM quality of service")
    cpus_per_task: int = knob(1, "CPUs per task", gt=0)
    mem_gb: float = knob(4.0, "memory per job in GB", gt=0)
    array_parallelism: int = knob(16, "jobs of one array running at once", gt=0)
    extra_sbatch: dict = knob({}, "further sbatch options, name -> value")
