"""Any reasoning-gym task by name (offline procedural tasks with verifiers), with a fixed held-out split.

The embedded default is ``chain_sum`` with a difficulty mix (2-3 terms of 1-2 digits), so the curve
saturates well below 1. For the tasks whose entries carry an arithmetic ``expression`` the task also
gives worked demonstrations (running partial sums) for the supervised warm-up of the tiny model.
"""
from __future__ import annotations

import re
from typing import List, Optional

from rlscale.config.schema import TaskConfig
from rlscale.tasks.base import Demonstration, Problem

DEFAULT_KWARGS = {"chain_sum": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}}
VAL_SEED_OFFSET = 1_000_003


class ReasoningGymTask:
    """Train and validation problems from ``reasoning_gym.create_dataset(cfg.dataset, ...)``; the
    validation split uses a different seed, so it is held out by construction (up to collisions of
    tiny problems, which are removed from the validation split)."""

    def __init__(self, cfg: TaskConfig):
        import reasoning_gym

        self.name = f"reasoning_gym/{cfg.dataset}"
        kwargs = {**DEFAULT_KWARGS.get(cfg.dataset, {}), **dict(cfg.dataset_kwargs)}
        try:
            self._train_ds = reasoning_gym.create_dataset(cfg.dataset, size=cfg.train_size, seed=cfg.seed, **kwargs)
            self._val_ds = reasoning_gym.create_dataset(cfg.dataset, size=cfg.val_size * 2,
                                                        seed=cfg.seed + VAL_SEED_OFFSET, **kwargs)
        except (ValueError, KeyError, TypeError, AssertionError) as err:
            raise ValueError(f"task.dataset '{cfg.dataset}' / task.dataset_kwargs: {err}") from None
        self._style = cfg.prompt_style
        self._train = [self._problem(i, e) for i, e in enumerate(self._train_ds)]
        seen = {e["question"] for e in self._train_ds}
        val_entries = [e for e in self._val_ds if e["question"] not in seen][: cfg.val_size]
        self._val = [self._problem(i, e) for i, e in enumerate(val_entries)]
        if not self._val:
            raise ValueError(f"task.train_size={cfg.train_size}: every validation problem of '{cfg.dataset}' is "
                             "also a training problem (a small problem space), so nothing is held out; "
                             "lower task.train_size")

    def _problem(self, index: int, entry: dict) -> Problem:
        expression = entry.get("metadata", {}).get("expression")
        if self._style == "expression" and expression:
            prompt = f"{expression} ="
        else:
            prompt = entry["question"]
        return Problem(index=index, prompt=prompt, answer=str(entry["answer"]), meta={"entry": entry})

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        return self._train_ds.score_answer(answer_text.strip(), entry=problem.meta["entry"]) >= 1.0

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        expression = problem.meta["entry"].get("metadata", {}).get("expression")
        if not expression or not re.fullmatch(r"\s*-?\d+(\s*[-+]\s*\d+)*\s*", expression):
            return None
        tokens = re.findall(r"[-+]|\d+", expression)
        total = int(tokens[0])
        steps = []
        for op, num in zip(tokens[1::2], tokens[2::2]):
            new = total + int(num) if op == "+" else total - int(num)
            steps.append(f"{total}{op}{num}={new}")
            total = new
        return Demonstration(think=";".join(steps), answer=str(total))
