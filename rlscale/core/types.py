"""The data that crosses module boundaries: think tags, sampled completions, generation counters,
the learner's input batch and its step result.

A completion carries, per token, the generator's log-probability (the denominator of the importance
ratio, Section 3.2), whether the token was sampled (forced interruption tokens are not trained on,
Section 3.2) and the policy version that sampled it (PipelineRL, Section 3.1). The train batch aligns
every per-token tensor to ``input_ids[:, 1:]`` ([N, L-1]), so position j holds the log-probability of
token j+1.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import List, Optional

import torch

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_think(completion: str) -> tuple[str, str]:
    """Split a completion into (think trace, answer text) at the last ``</think>``; a completion without
    the marker has no answer (the think budget ran out)."""
    head, sep, tail = completion.rpartition(THINK_CLOSE)
    if not sep:
        return completion, ""
    return head.replace(THINK_OPEN, "", 1), tail.strip()


@dataclass
class Completion:
    """One sampled completion. ``sampled[t]`` is False for forced tokens (the interruption phrase),
    which are not trained on. ``versions[t]``: policy version that produced token t."""

    prompt_ids: List[int]
    tokens: List[int]
    gen_logp: List[float]
    sampled: List[bool]
    versions: List[int]
    interrupted: bool = False
    truncated: bool = False
    think_tokens: int = 0
    text: str = ""
    thinks: bool = True

    @property
    def answer(self) -> str:
        """The answer text: after the last ``</think>`` of a thinking trace (none if it never closed),
        else the whole completion."""
        return split_think(self.text)[1] if self.thinks else self.text.strip()


@dataclass
class GenerationStats:
    """A generator's running counters."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    decode_steps: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


@dataclass
class TrainBatch:
    """Learner input. Shapes: input_ids/attention_mask [N, L]; gen_logp, mask, versions [N, L-1];
    rewards, group_ids [N]."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    gen_logp: torch.Tensor
    mask: torch.Tensor
    versions: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor

    @property
    def num_sequences(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, index: torch.Tensor | slice) -> "TrainBatch":
        """The rows ``index`` selects (a slice gives views)."""
        return TrainBatch(*(t[index] for t in (self.input_ids, self.attention_mask, self.gen_logp, self.mask,
                                               self.versions, self.rewards, self.group_ids)))

    def padded(self, width: int) -> "TrainBatch":
        """The batch right-padded to ``width`` tokens (padding is outside the mask and the attention)."""
        extra = width - self.input_ids.shape[1]
        if extra <= 0:
            return self
        pad = torch.nn.functional.pad
        return TrainBatch(pad(self.input_ids, (0, extra), value=0), pad(self.attention_mask, (0, extra)),
                          pad(self.gen_logp, (0, extra)), pad(self.mask, (0, extra)),
                          pad(self.versions, (0, extra), value=-1), self.rewards, self.group_ids)

    def to(self, device: torch.device) -> "TrainBatch":
        """Every tensor of the batch on ``device``."""
        return TrainBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(TrainBatch)})


@dataclass
class StepResult:
    """One optimizer update: the batch loss, the gradient norm before clipping and the token-weighted
    means of the loss's diagnostics (``kl`` only with a reference policy). ``follower_cpu_s``: the CPU seconds
    the other trainer ranks of a DeepSpeed job spent on it (0 for one process)."""

    loss: float
    grad_norm: float
    clip_fraction: float
    ratio_mean: float
    entropy: float
    kl: Optional[float]
    trained_tokens: int
    follower_cpu_s: float = 0.0
