"""The shape of a run's job as the report shows it: trainer ranks over nodes, the GPUs the job held, the
learner and the PipelineRL generator processes (Section 3.1: the trainer / generator split).

The shape the ranks found is in the metrics lines (``nodes``, ``tasks_per_node`` of a run over several
ranks, ``generator_tasks`` of a job whose tasks run the generators; ``gpus`` on CUDA;
docs/results-contract.md), the learner and the generators in config.yaml. A run written before the lines
carried ``gpus`` shows the GPU count as unknown.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from rlscale.runfolder.metrics import is_finite_number


@dataclass(frozen=True)
class JobView:
    nodes: int = 1
    tasks_per_node: int = 1
    device: str = "unknown"  # "cuda" (the lines carry gpu_hours), "cpu" (core_hours) or "unknown"
    gpus: Optional[int] = None
    learner: str = "unknown"
    zero_stage: Optional[int] = None
    generators: int = 0  # PipelineRL generator processes beside the trainer (offpolicy=pipeline)
    generator_tasks: int = 0  # ... or the job's tasks that run them (launcher.generator_tasks)

    @classmethod
    def of(cls, records: List[dict], config: dict) -> "JobView":
        """From a run's metrics lines (the last one that names a compute unit) and its config.yaml."""
        line = next((r for r in reversed(records) if "gpu_hours" in r or "core_hours" in r), {})
        engine = _section(config, "engine")
        offpolicy = _section(config, "offpolicy")
        learner = str(engine.get("learner", "unknown"))
        pipeline = offpolicy.get("name") == "pipeline"
        stage = engine.get("zero_stage")
        return cls(nodes=_count(line.get("nodes")), tasks_per_node=_count(line.get("tasks_per_node")),
                   device="cuda" if "gpu_hours" in line else "cpu" if "core_hours" in line else "unknown",
                   gpus=_count(line["gpus"]) if "gpus" in line else None, learner=learner,
                   zero_stage=int(stage) if learner == "deepspeed" and is_finite_number(stage) else None,
                   generators=_count(offpolicy.get("num_generators")) if pipeline else 0,
                   generator_tasks=_count(line["generator_tasks"]) if "generator_tasks" in line else 0)

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def text(self) -> str:
        """E.g. "2 nodes x 8 trainer ranks (deepspeed ZeRO-3), 2 generator processes, 20 GPUs"."""
        learner = f"{self.learner} ZeRO-{self.zero_stage}" if self.zero_stage is not None else self.learner
        ranks = "1 trainer rank" if self.ranks == 1 else f"{self.tasks_per_node} trainer ranks"
        parts = [f"{self.nodes} node{'s' if self.nodes > 1 else ''} x {ranks} ({learner})"]
        if self.generator_tasks:
            parts.append(f"{self.generator_tasks} generator task{'s' if self.generator_tasks > 1 else ''}")
        elif self.generators:
            parts.append(f"{self.generators} generator process{'es' if self.generators > 1 else ''}")
        if self.device == "cuda":
            parts.append("GPUs unknown" if self.gpus is None else f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}")
        else:
            parts.append(self.device)
        return ", ".join(parts)


def _section(config: dict, name: str) -> dict:
    section = config.get(name) if isinstance(config, dict) else None
    return section if isinstance(section, dict) else {}


def _count(value) -> int:
    return int(value) if is_finite_number(value) and value >= 1 else 1
