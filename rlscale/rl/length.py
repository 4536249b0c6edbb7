"""Length control (ScaleRL Section 3.2, "Length control"; interruptions are also the Section-2
baseline's).

- Interruption: generation of the thinking trace stops at a think budget drawn uniformly from a window
  (paper: [10k, 12k] tokens); the engine then appends the phrase "Okay, time is up. Let me stop
  thinking and formulate a final answer now. </think>" and generates the answer.
  ``interruption_length`` draws that budget.
- DAPO overlong penalty (Yu et al. 2025, "overlong reward shaping"), added to the reward of correct
  traces: clip((l_max - |y|) / l_cache - 1, -1, 0), i.e. 0 up to l_max - l_cache tokens, then linear
  down to -1 at l_max and beyond (paper: l_max 14k, l_cache 2k).

``LENGTHS`` holds the reward shaping of each ``length.name``, whose ``cfg`` annotation names the option's config
class (``InterruptionConfig``, ``PenaltyConfig``, or ``LengthConfig`` for none): the run's ``length`` section is
typed by it when the config is composed (``rlscale.config.compose``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List

import torch
from torch import Tensor

from rlscale.knobs import knob

LENGTH_NAME = "the length control (``length=NAME``)"


@dataclass
class LengthConfig:
    """What every length control has: its name, and the interruption phrase, which the tokenizers know whatever
    the control (the tiny model's characters include it)."""

    name: str = knob("none", LENGTH_NAME, "Sec. 3.2")
    phrase: str = knob("Okay, time is up. Let me stop thinking and formulate a final answer now. </think>",
                       "interruption: the text appended before the answer is generated", "Sec. 3.2")

    def longest_think(self, max_think_tokens: int) -> int:
        """The longest think budget a trace can get: ``generation.max_think_tokens``, where traces are truncated."""
        return max_think_tokens

    def think_budgets(self, n: int, max_think_tokens: int, rng: torch.Generator) -> Tensor:
        """[n] long: each trace's think budget, drawn from ``rng`` by the generators (here every trace's is
        ``generation.max_think_tokens``)."""
        return torch.full((n,), max_think_tokens, dtype=torch.long)


@dataclass
class InterruptionConfig(LengthConfig):
    """Where the think trace is cut (ScaleRL, Sec. 3.2)."""

    name: str = knob("interruption", LENGTH_NAME, "Sec. 3.2")
    window: List[int] = knob([20, 24], "[lo, hi], the think length at which the phrase is appended, drawn "
                             "uniformly (paper: [10k, 12k] of a 12,288-token think budget); 0 < lo <= hi",
                             "Sec. 3.2", gt=0)

    def longest_think(self, max_think_tokens: int) -> int:
        """The window's upper end: the interruption comes at the latest there."""
        return self.window[1]

    def think_budgets(self, n: int, max_think_tokens: int, rng: torch.Generator) -> Tensor:
        """[n] long: where each trace's interruption comes, drawn uniformly from the window (Sec. 3.2)."""
        lo, hi = self.window
        return torch.randint(lo, hi + 1, (n,), generator=rng)


@dataclass
class PenaltyConfig(LengthConfig):
    """DAPO's overlong penalty (Sec. 3.2)."""

    name: str = knob("penalty", LENGTH_NAME, "Sec. 3.2")
    l_max: int = knob(32, "DAPO's L_max in clip((l_max - |y|) / l_cache - 1, -1, 0) on correct traces (paper: 14k of "
                      "a 14,336-token budget; here the 32-token budget)", "Sec. 3.2", gt=0)
    l_cache: int = knob(5, "DAPO's L_cache, the penalty ramps over the last l_cache tokens before l_max (paper: 2k, "
                        "the penalty starting at 84 % of the budget; here 5, at 27 of 32 tokens); "
                        "0 < l_cache <= l_max <= max_think_tokens + max_answer_tokens", "Sec. 3.2", gt=0)


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


def penalty(rewards: Tensor, lengths: Tensor, correct: Tensor, cfg: PenaltyConfig) -> Tensor:
    """DAPO overlong penalty on correct traces (Sec. 3.2)"""
    return rewards + dapo_length_penalty(lengths, correct, cfg.l_max, cfg.l_cache)


def interruption(rewards: Tensor, lengths: Tensor, correct: Tensor, cfg: InterruptionConfig) -> Tensor:
    """the think trace is cut at a random length in the window, then the answer follows (ScaleRL, Sec. 3.2)"""
    return rewards  # the interruption acts in the generators


def none(rewards: Tensor, lengths: Tensor, correct: Tensor, cfg: LengthConfig) -> Tensor:
    """no length control: the budgets alone truncate"""
    return rewards


RewardShaping = Callable[[Tensor, Tensor, Tensor, LengthConfig], Tensor]
LENGTHS: Dict[str, RewardShaping] = {"interruption": interruption, "penalty": penalty, "none": none}
"""The reward shaping of each length control: [N] rewards, lengths, correct -> [N] shaped rewards."""

