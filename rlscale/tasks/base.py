"""The Task interface: prompts with reference answers, a fixed held-out split, and a verifier.

Rewards are +1 / -1 for correct / incorrect (Section 2); a Task only says whether an answer is correct.
The completion given to ``is_correct`` is the model's text after the ``</think>`` marker (the trace is
stripped first, as the paper does before Math-Verify).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Protocol

@dataclass(frozen=True)
class Problem:
    """One prompt. ``index`` is its position in its split (stable across runs for the same config)."""

    index: int
    prompt: str
    answer: str
    meta: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Demonstration:
    """A supervised target for the warm-up of the embedded model: think trace and final answer."""

    think: str
    answer: str


class Task(Protocol):
    """A task class, built from its ``TaskConfig``. It may also give a classmethod ``config_problems(cfg, where)
    -> List[str]``: one line per problem of the config, ``field '<where>.<field>': ...``, found without building
    it; validation calls it as the config is composed (every built-in task has one)."""

    name: str

    def train_problems(self) -> List[Problem]:
        ...

    def val_problems(self) -> List[Problem]:
        ...

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        ...

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        """A worked solution for the supervised warm-up, or None when the task has none."""
        ...

