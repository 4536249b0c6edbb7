"""The configured generator (``engine.generator``): the native torch generator or vLLM, with the run's
generation, length-control (Section 3.2) and LM-head precision settings."""
from __future__ import annotations

import torch

from rlscale.config.schema import RunConfig
from rlscale.core.protocols import Generator, PolicyTokenizer


def build_generator(cfg: RunConfig, model, tok: PolicyTokenizer, device: torch.device) -> Generator:
    if cfg.engine.generator == "vllm":
        from rlscale.engines.generators.vllm_generator import VLLMGenerator

        return VLLMGenerator(cfg, model, tok)
    from rlscale.engines.generators.torch_generator import TorchGenerator

    return TorchGenerator(model, tok, cfg.generation, cfg.length, cfg.precision.lm_head_fp32, device,
                          compiled=cfg.engine.compile, think=tok.think)
