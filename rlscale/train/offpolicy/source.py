"""The parts of the run an off-policy source is built from (Section 3.1), beside its own config section
(``rlscale.train.offpolicy.configs``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from rlscale.config.schema import BatchConfig
from rlscale.engines.generators.build import GeneratorSettings
from rlscale.train.rollouts import RolloutSampler

@dataclass(frozen=True)
class SourceInputs:
    """The parts of the run a rollout source is built from (``rlscale.train.components.build_source``).

    sampler:         samples and scores the batches (``rlscale.train.rollouts``).
    model:           the learner's policy (PPO keeps its weights; PipelineRL publishes them).
    run_dir:         the run folder (PipelineRL's generator logs).
    generator:       the generator's own settings, which PipelineRL's generator processes build theirs from.
    batch:           the batch of one update.
    generator_tasks: the job's tasks that run PipelineRL's generators (``launcher.generator_tasks``), 0: none.
    """

    sampler: RolloutSampler
    model: torch.nn.Module
    run_dir: Path
    generator: GeneratorSettings
    batch: BatchConfig
    generator_tasks: int = 0
