"""The generator's own config and the configured generator (``engine.generator``): the native torch
generator or vLLM, with the run's generation and length-control settings (Section 3.2), the LM-head
precision (Section 3.2) and the sampling seed. A generator process of PipelineRL (Section 3.1) is built
from these settings alone."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlscale.config.registry import GENERATOR
from rlscale.config.schema import GenerationConfig
from rlscale.core.protocols import Generator, PolicyTokenizer
from rlscale.rl.length import LengthConfig


@dataclass(frozen=True)
class GeneratorSettings:
    """Made from the run's config by ``rlscale.train.components.generator_settings``. ``backend``:
    ``engine.generator``; ``compiled``: ``engine.compile`` (the torch generator's GPU path); ``fp32_head``:
    ``precision.lm_head_fp32``; ``seed``: the run's seed (vLLM's engine seed); ``rows``: ``engine.generator_rows``
    resolved (``rlscale.train.components.resolved_generator_rows``; 0: every row of a call at once)."""

    backend: str
    generation: GenerationConfig
    length: LengthConfig
    fp32_head: bool
    compiled: bool
    seed: int
    rows: int = 0


def build_generator(settings: GeneratorSettings, model, tok: PolicyTokenizer, device: torch.device) -> Generator:
    """The generator of ``settings.backend`` (``rlscale.config.registry.GENERATOR``), its module imported now."""
    return GENERATOR.load(settings.backend)(settings, model, tok, device)
