"""How a chat model's answer is asked for and read (``task.answer_format``), on any task.

- ``exact``: the prompt is the task's; the whole answer text goes to the task's verifier
  (reasoning-gym's ``score_answer``, Math-Verify for math files). The embedded default's setting.
- ``tagged``: reasoning-gym's convention: the prompt ends with the instruction to give the final answer
  as ``<answer>...</answer>``, and the content of the last such tag goes to the task's verifier (no tag:
  no answer).
- ``math_verify``: the prompt is the task's; Math-Verify compares the answer's stated final answer with
  the reference answer (Section 2's verifier), so a sentence such as "The answer is 9." or ``\\boxed{9}``
  scores as 9.

Whatever the format, an answer is correct only when it states a value (``rlscale.tasks.stated``): the
question repeated ("42 * 25"), a restatement with a wrong result ("42 * 25 = 1040") and a list of
candidates ("1040 or 1050") are incorrect. Rewards stay +1 / -1 for correct / incorrect (Section 2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from rlscale.config.registry import ANSWER_FORMAT
from rlscale.tasks.base import Demonstration, Problem, Task

TAGGED_INSTRUCTION = ("Provide the final answer in the following format: <answer>answer here</answer>. "
                      "Do not explain your reasoning inside the answer tags, provide only the final answer.")


@dataclass(frozen=True)
class AnswerFormat:
    """One of ``rlscale.config.registry.ANSWER_FORMAT``: what the prompt asks for and which part of the answer
    text is checked."""

    name: str

    def __post_init__(self):
        ANSWER_FORMAT.check(self.name)

    def prompt(self, question: str) -> str:
        return f"{question}\n\n{TAGGED_INSTRUCTION}" if self.name == "tagged" else question

    def extract(self, answer_text: str) -> Optional[str]:
        """The part of the answer text that is checked; None when there is none (a tagged format
        without a tag)."""
        if self.name == "tagged":
            from reasoning_gym.utils import extract_answer

            return extract_answer(answer_text)
        return answer_text.strip()


class FormattedTask:
    """``task`` with its prompts and verification in ``answer_format``; problems keep their index,
    reference answer and metadata."""

    def __init__(self, task: Task, answer_format: AnswerFormat):
        self.task = task
        self.format = answer_format
        self.name = task.name
        self._train = [self._formatted(p) for p in task.train_problems()]
        self._val = [self._formatted(p) for p in task.val_problems()]

    def _formatted(self, problem: Problem) -> Problem:
        prompt = self.format.prompt(problem.prompt)
        if prompt == problem.prompt:
            return problem
        return Problem(index=problem.index, prompt=prompt, answer=problem.answer, meta=problem.meta)

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def extract(self, problem: Problem, answer_text: str) -> Optional[str]:
        """The part of ``answer_text`` (an answer to ``problem``) that is checked; None when there is none."""
        return self.format.extract(answer_text)

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        answer = self.extract(problem, answer_text)
        if not answer:
            return False
        if self.format.name == "math_verify":
            from rlscale.tasks.math import math_verify_correct

            return math_verify_correct(problem.answer, answer, problem.prompt)
        return self.task.is_correct(problem, answer)

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        return self.task.demonstration(problem)
