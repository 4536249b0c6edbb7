"""The learner's own config and the configured learner (``engine.learner``): the plain torch learner or
DeepSpeed ZeRO, with the run's optimizer (Section 2), policy loss (Section 3.2), LM-head precision (Section
3.2), sampling temperature (the learner's log-probs must be those the generator sampled from) and what it
recomputes in the backward rather than keeps (activation checkpointing, the head's chunks), for the paper's
sequences of 12,288 think + 2,048 answer tokens (Section 2)."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from rlscale.config.registry import LEARNER
from rlscale.config.schema import OptimConfig
from rlscale.core.protocols import Learner
from rlscale.engines.memory import HEAD_CHUNK_TOKENS
from rlscale.rl.losses import LossConfig, PolicyLoss


@dataclass(frozen=True)
class LearnerSettings:
    """Made from the run's config by ``rlscale.train.components.learner_settings_of``. ``backend``:
    ``engine.learner``; ``optim``: the optimizer section; ``loss``: the loss section (its option's config class) and
    ``policy``: the loss it names, resolved once there;
    ``fp32_head``: ``precision.lm_head_fp32``; ``temperature``: ``generation.temperature``; ``micro_batch``:
    ``batch.micro_batch`` (sequences per forward/backward, per rank under DeepSpeed; 0 = all);
    ``zero_stage``: ``engine.zero_stage`` and ``dtype``: ``model.dtype`` (DeepSpeed); ``compiled``: the torch
    learner compiles its log-prob pass (``engine.compile`` on CUDA); ``max_width``: the width every compiled
    batch is padded to (the run's longest sequence; 0 = none, ``rlscale.engines.learners.torch_learner``);
    ``checkpointing``: activation checkpointing per decoder layer (``engine.activation_checkpointing``
    resolved, ``rlscale.train.components.auto_checkpointing``); ``head_chunk``: positions per pass of the LM head
    (``rlscale.engines.models.policy.chunked_head_logprobs``; 0 = the whole micro-batch)."""

    backend: str
    optim: OptimConfig
    loss: LossConfig
    policy: PolicyLoss
    fp32_head: bool
    temperature: float
    micro_batch: int
    zero_stage: int
    dtype: str
    compiled: bool = False
    max_width: int = 0
    checkpointing: bool = False
    head_chunk: int = HEAD_CHUNK_TOKENS


def build_learner(settings: LearnerSettings, model) -> Learner:
    """The learner of ``settings.backend`` (``rlscale.config.registry.LEARNER``), its module imported now, with a
    frozen copy of the policy as the KL reference when ``loss.kl_coef`` > 0."""
    ref_model = copy.deepcopy(model).eval() if settings.loss.kl_coef > 0 else None
    return LEARNER.load(settings.backend)(settings, model, ref_model)
