"""Length control (ScaleRL Section 3.2, "Length control"; interruptions are also the Section-2
baseline's).

- Interruption: generation of the thinking trace stops at a think budget drawn uniformly from a window
  (paper: [10k, 12k] tokens); the engine then appends the phrase "Okay, time is up. Let me stop
  thinking and formulate a final answer now. </think>" and generates the answer.
  ``interruption_length`` draws that budget.
- DAPO overlong penalty (Yu et al. 2025, "overlong reward shaping"), added to the reward of correct
  traces: clip((l_max - |y|) / l_cache - 1, -1, 0), i.e. 0 up to l_max - l_cache tokens, then linear
  down to -1 at l_max and beyond (paper: l_max 14k, l_cache 2k).

``overlong_penalty`` and ``unshaped`` are the reward shaping of each ``length.name``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from rlscale.config.schema import LengthConfig


def dapo_length_penalty(lengths: Tensor, correct: Tensor, l_max: int, l_cache: int) -> Tensor:
    """Reward penalty per sequence.

    lengths: [N] long, completion lengths |y_i| in tokens.
    correct: [N] bool, which traces are correct (only they are penalised).
    Returns [N] float32 in [-1, 0]; 0 for incorrect traces.
    """
    if not 0 < l_cache <= l_max:
        raise ValueError(f"need 0 < l_cache <= l_max, got l_cache={l_cache}, l_max={l_max}")
    if lengths.shape != correct.shape:
        raise ValueError(f"lengths {tuple(lengths.shape)} and correct {tuple(correct.shape)} differ")
    penalty = ((l_max - lengths.float()) / l_cache - 1.0).clamp(-1.0, 0.0)
    return torch.where(correct.bool(), penalty, torch.zeros_like(penalty))


def overlong_penalty(rewards: Tensor, lengths: Tensor, correct: Tensor, cfg: LengthConfig) -> Tensor:
    """``length=penalty``: [N] the rewards plus the DAPO overlong penalty of ``cfg.l_max`` and ``cfg.l_cache``."""
    return rewards + dapo_length_penalty(lengths, correct, cfg.l_max, cfg.l_cache)


def unshaped(rewards: Tensor, lengths: Tensor, correct: Tensor, cfg: LengthConfig) -> Tensor:
    """``length=interruption`` and ``length=none``: [N] the rewards as they are (an interruption acts in the
    generators)."""
    return rewards


def interruption_length(window: tuple[int, int], generator: torch.Generator) -> int:
    """A think budget drawn uniformly from the integers lo..hi (both included), ``window = (lo, hi)``."""
    lo, hi = window
    if not 0 <= lo <= hi:
        raise ValueError(f"interruption window must satisfy 0 <= lo <= hi, got {tuple(window)}")
    return int(torch.randint(lo, hi + 1, (1,), generator=generator).item())
