"""Compute accounting for the x axis of the scaling curve (Section 2: C in GPU-hours).

The measured unit is named for what it measures. On CUDA, ``gpu_hours`` = wall seconds of the training
work (generation + updates, evaluation excluded) x every GPU the job holds / 3600, less the seconds spent
compiling and capturing graphs (``rlscale.engines.compile_cost``: a fixed cost of starting a process, logged
apart as ``compile_s``). The GPUs the job holds are those rank 0 sees on its node times the job's nodes (those
of its generator tasks included, ``launcher.generator_tasks``); a run over several trainer ranks (each rank on a
GPU of its node) thus counts world size x wall at least, as the paper's C counts every GPU of a run (Sec. 2). On CPU,
``core_hours`` = CPU seconds of rank 0's process and its children (the PipelineRL generator processes
included), plus those the other trainer ranks spent on each update, / 3600; a CPU run carries no
``gpu_hours`` (CPU runs do not compile). Both are measured and move with machine load. ``flops`` is analytic (it depends on the tokens alone, so the
same seed gives the same value on any machine): 2 x params per processed token for generation (prefill +
decode), 6 x params per trained token, 2 x params per extra scoring forward (TIS or KL reference).
``samples`` and ``tokens`` (generated) are counts. A run over several trainer ranks adds its job shape,
``nodes`` and ``tasks_per_node`` (and ``generator_tasks`` when it has them), to every line; a CUDA run adds
``gpus``, the GPUs its ``gpu_hours`` count.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from rlscale.engines.compile_cost import STALLS
from rlscale.train.ranks import job_tasks


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class ComputeTotals:
    device_seconds: float = 0.0
    flops: float = 0.0
    samples: int = 0
    tokens: int = 0

    def as_metrics(self, device_type: str) -> dict:
        """The metrics-line fields: ``gpu_hours`` on CUDA, ``core_hours`` elsewhere, and the counts."""
        measured = "gpu_hours" if device_type == "cuda" else "core_hours"
        return {measured: self.device_seconds / 3600.0, "flops": self.flops, "samples": self.samples,
                "tokens": self.tokens}


@dataclass(frozen=True)
class JobShape:
    """The nodes and trainer ranks per node of the run's job, from torch's distributed environment
    (``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``: exported by rlscale.train.ranks, or set by torchrun), and its generator
    tasks (``launcher.generator_tasks``), which may hold nodes of their own (``job_nodes``)."""

    nodes: int = 1
    tasks_per_node: int = 1
    generator_tasks: int = 0
    job_nodes: int = 1

    @classmethod
    def of_environment(cls) -> "JobShape":
        world = int(os.environ.get("WORLD_SIZE", "1"))
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        tasks, job_per_node, generators = job_tasks()
        nodes = max(1, world // max(1, per_node))
        return cls(nodes, max(1, per_node), generators, max(nodes, -(-tasks // max(1, job_per_node))))

    def as_metrics(self) -> dict:
        """The metrics-line fields of a run over several ranks or with generator tasks (none for a single
        process)."""
        if self.nodes * self.tasks_per_node == 1 and not self.generator_tasks:
            return {}
        shape = {"nodes": self.nodes, "tasks_per_node": self.tasks_per_node}
        return {**shape, "generator_tasks": self.generator_tasks} if self.generator_tasks else shape


class ComputeMeter:
    """Accumulates ComputeTotals; ``measure()`` brackets the work that counts as training compute.
    ``num_devices`` is the GPUs this process sees; on CUDA every node of the job counts as many."""

    def __init__(self, params: int, device_type: str, num_devices: int = 1):
        self.params = params
        self.device_type = device_type
        self.shape = JobShape.of_environment()
        self.num_devices = num_devices * self.shape.job_nodes
        self.totals = ComputeTotals()

    def measure(self) -> "_Span":
        return _Span(self)

    def add_generation(self, prompt_tokens: int, generated_tokens: int, samples: int) -> None:
        self.totals.flops += 2.0 * self.params * (prompt_tokens + generated_tokens)
        self.totals.samples += samples
        self.totals.tokens += generated_tokens

    def add_training(self, trained_tokens: int, extra_forwards: int = 0, follower_cpu_s: float = 0.0) -> None:
        """An update's FLOPs; on CPU also the CPU seconds the other trainer ranks spent on it."""
        self.totals.flops += (6.0 + 2.0 * extra_forwards) * self.params * trained_tokens
        if self.device_type != "cuda":
            self.totals.device_seconds += follower_cpu_s

    def as_metrics(self) -> dict:
        held = {"gpus": self.num_devices} if self.device_type == "cuda" else {}
        return {**self.totals.as_metrics(self.device_type), **held, **self.shape.as_metrics()}

    def state_dict(self) -> dict:
        return asdict(self.totals)

    def load_state_dict(self, state: dict) -> None:
        self.totals = ComputeTotals(**state)


class _Span:
    def __init__(self, meter: ComputeMeter):
        self.meter = meter

    def __enter__(self):
        self.cpu0, self.wall0, self.stalled0 = cpu_seconds(), time.perf_counter(), STALLS.seconds
        return self

    def __exit__(self, *exc):
        if self.meter.device_type == "cuda":
            wall = time.perf_counter() - self.wall0 - (STALLS.seconds - self.stalled0)
            seconds = max(0.0, wall) * self.meter.num_devices
        else:
            seconds = cpu_seconds() - self.cpu0
        self.meter.totals.device_seconds += seconds
        return False
