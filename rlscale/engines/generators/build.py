"""The generator's own config and the configured generator (``engine.generator``): the native torch
generator or vLLM, with the run's generation and length-control settings (Section 3.2), the LM-head
precision (Section 3.2) and the sampling seed. A generator process of PipelineRL (Section 3.1) is built
from these settings alone."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch

from rlscale.config.registry import GENERATOR
from rlscale.config.schema import GenerationConfig, RunConfig
from rlscale.core.protocols import Generator, PolicyTokenizer
from rlscale.rl.length import LengthConfig


@dataclass(frozen=True)
class GeneratorSettings:
    """``backend``: ``engine.generator``; ``compiled``: ``engine.compile`` (the torch generator's GPU path);
    ``fp32_head``: ``precision.lm_head_fp32``; ``seed``: the run's seed (vLLM's engine seed); ``rows``:
    ``engine.generator_rows`` resolved (``generator_rows``; 0: every row of a call at once)."""

    backend: str
    generation: GenerationConfig
    length: LengthConfig
    fp32_head: bool
    compiled: bool
    seed: int
    rows: int = 0

    @classmethod
    def of(cls, cfg: RunConfig, rows: Optional[int] = None) -> "GeneratorSettings":
        """``rows``: ``engine.generator_rows`` resolved; None: as configured, ``auto`` as 0."""
        configured = cfg.engine.generator_rows
        rows = (0 if configured == "auto" else configured) if rows is None else rows
        return cls(cfg.engine.generator, cfg.generation, cfg.length, cfg.precision.lm_head_fp32, cfg.engine.compile,
                   cfg.seed, rows)


def generator_rows(cfg: RunConfig, model, prompt_tokens: int, device: torch.device) -> int:
    """``engine.generator_rows`` resolved for this run's job (``rlscale.engines.memory.generator_rows``: the card
    of ``device``, ``model``'s shape, prompts of ``prompt_tokens``, activation checkpointing as the learners
    resolve it); ValueError naming the field when the rows do not fit. As configured (``auto`` as 0) off CUDA
    and for generators other than torch, which do not read it."""
    from rlscale.engines import memory

    configured = cfg.engine.generator_rows
    if device.type != "cuda" or cfg.engine.generator != "torch":
        return 0 if configured == "auto" else configured
    shape, job = memory.ModelShape.of_config(model.config), memory.JobLayout.of(cfg, prompt_tokens)
    card = torch.cuda.get_device_properties(device).total_memory
    if cfg.engine.activation_checkpointing == "auto":
        job = replace(job, checkpointing=memory.checkpointing_needed(shape, job, card))
    return memory.generator_rows(shape, job, card)


def build_generator(settings: GeneratorSettings, model, tok: PolicyTokenizer, device: torch.device) -> Generator:
    """The generator of ``settings.backend`` (``rlscale.config.registry.GENERATOR``), its module imported now."""
    return GENERATOR.load(settings.backend)(settings, model, tok, device)
