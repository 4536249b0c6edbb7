"""Benchmark workloads (batch and lengths, Section 3.2's think budget, interruption phrase and answer),
a synthetic policy tokenizer and task (random weights: the text carries no meaning)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import torch

from rlscale.core.types import THINK_CLOSE
from rlscale.tasks.base import Problem


@dataclass(frozen=True)
class Workload:
    prompts: int
    generations: int
    prompt_len: int
    think: int
    answer: int
    pool: int

    @property
    def phrase(self) -> int:
        return 8

    @property
    def completion(self) -> int:
        return self.think + self.phrase + self.answer


PAPER_ROWS = 768  # the paper's batch: 48 prompts x 16 generations (Section 2)
GPU_WORK = Workload(prompts=32, generations=8, prompt_len=128, think=480, answer=24, pool=1024)
CPU_WORK = Workload(prompts=2, generations=2, prompt_len=8, think=16, answer=4, pool=64)


@dataclass(frozen=True)
class BenchTokenizer:
    """Token ids as text ("17 4032 ..."); the top ids are padding, end of sequence, ``</think>`` and the
    7 other tokens of the interruption phrase. Traces think, as the paper's do."""

    vocab_size: int
    think: bool = True

    @property
    def pad_id(self) -> int:
        return self.vocab_size - 1

    @property
    def eos_id(self) -> int:
        return self.vocab_size - 2

    @property
    def think_close_ids(self) -> List[int]:
        return [self.vocab_size - 3]

    @property
    def interrupt_ids(self) -> List[int]:
        return list(range(self.vocab_size - 10, self.vocab_size - 3)) + self.think_close_ids

    @property
    def ordinary(self) -> int:
        """Ids below this are plain tokens."""
        return self.vocab_size - 10

    def encode_prompt(self, question: str) -> List[int]:
        return [int(x) for x in question.split()]

    def decode(self, ids: Sequence[int]) -> str:
        close = self.think_close_ids[0]
        return " ".join(THINK_CLOSE if int(i) == close else str(int(i)) for i in ids if int(i) != self.pad_id)


class BenchTask:
    """Random prompts; an answer is "correct" when its text has even length (a trivial reward with
    variance, as TRL gets below)."""

    name = "bench"

    def __init__(self, tok: BenchTokenizer, work: Workload, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, tok.ordinary, (work.pool, work.prompt_len), generator=gen)
        self.problems = [Problem(i, " ".join(map(str, row.tolist())), "") for i, row in enumerate(ids)]

    def train_problems(self) -> List[Problem]:
        return self.problems

    def val_problems(self) -> List[Problem]:
        return []

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        return len(answer_text) % 2 == 0

    def demonstration(self, problem: Problem):
        return None


def trivial_reward(text: str) -> float:
    return 1.0 if len(text) % 2 == 0 else -1.0
