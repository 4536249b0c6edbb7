"""The interfaces the training loop sees: a tokenizer, a generator (torch | vLLM) and a learner
(torch | DeepSpeed), so the backends are swapped by the component builder without touching the loop."""
from __future__ import annotations

from typing import Callable, List, Optional, Protocol, Sequence

import torch

from rlscale.core.types import Completion, GenerationStats, StepResult, TrainBatch


class PolicyTokenizer(Protocol):
    """What the generator and learner need from a tokenizer, for the char tokenizer and HF tokenizers alike."""

    vocab_size: int
    pad_id: int
    eos_id: int
    think_close_ids: List[int]
    interrupt_ids: List[int]
    think: bool

    def encode_prompt(self, question: str) -> List[int]:
        """Token ids of the prompt, ending where the model starts its ``<think>`` trace (with ``think``)
        or its answer."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        ...


class Generator(Protocol):
    """Samples completions (Section 3.2 length control applied) and counts its work in ``stats``.
    ``version_hook``, called between decode steps, may swap the weights and returns the current policy
    version (PipelineRL's in-flight update, Section 3.1)."""

    stats: GenerationStats

    def generate(self, prompts: Sequence[List[int]], rng: torch.Generator, version: int = 0,
                 version_hook: Optional[Callable[[], int]] = None) -> List[Completion]:
        ...


class Learner(Protocol):
    """One optimizer update per batch with the batch's global aggregation weights (Section 3.2); its
    state (optimizer, schedule) round-trips through ``state_dict``."""

    scheduler: torch.optim.lr_scheduler.LRScheduler

    def step(self, batch: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor) -> StepResult:
        ...

    def state_dict(self) -> dict:
        ...

    def load_state_dict(self, state: dict) -> None:
        ...

    def close(self) -> None:
        ...


class FollowerLearner(Learner, Protocol):
    """The learner of a rank > 0 of a multi-process launch (DeepSpeed): ``follow`` carries out rank 0's learner
    calls until rank 0 closes its learner."""

    def follow(self) -> None:
        ...
