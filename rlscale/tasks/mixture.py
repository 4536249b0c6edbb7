"""Several tasks trained together in one run (``task.name=mixture``, the parts in ``mixture.parts``).

The paper trains on a math and code mixture and reports each domain's held-out curve beside the other
(Section 5: "multi-task RL"). Here each part is a task with its own answer format; the mixture is a task
whose problems are the parts' problems, relabelled:

- training prompts: the parts' training splits interleaved by weight, so every prefix of the list (the RL
  pool takes the first ``curriculum.pool_size``) holds each part in its share, up to one prompt; the list
  stops when a part has no prompt left for its share;
- held-out prompts: every part's whole held-out split, part after part; the eval's ``val_reward`` pools
  them, and ``val_reward/<part>`` is each part's own (``rlscale.train.evaluate``);
- an answer is extracted and scored by the part its problem came from (``Problem.meta["task"]`` names it);
  rewards stay +1 / -1 (Section 2).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from rlscale.tasks.answer_format import FormattedTask
from rlscale.knobs import knob
from rlscale.tasks.base import TASK_NAME, Demonstration, Problem, TaskConfig

PART_KEY = "task"  # Problem.meta key naming the part of a mixture a problem belongs to


@dataclass
class MixtureTaskConfig(TaskConfig):
    """Several tasks trained together (``task.name=mixture``). The parts, each with its own task config, are the
    top-level section ``mixture.parts`` (``rlscale.config.schema.MixtureConfig``), where older config.yaml files
    hold them too; the knobs here are not read: each part's task has its own sizes, seed and answer format."""

    name: str = knob("mixture", TASK_NAME, "Sec. 5")

@dataclass(frozen=True)
class Part:
    """One task of a mixture, built, with its name and weight."""

    name: str
    weight: float
    task: FormattedTask


def interleave(sizes: Sequence[int], weights: Sequence[float]) -> List[Tuple[int, int]]:
    """(part, index within the part) in training order: each next prompt comes from the part furthest below
    its share (count / weight smallest after taking it; ties to the earlier part), until the part whose turn
    it is has none left."""
    counts = [0] * len(sizes)
    order = []
    while True:
        part = min(range(len(sizes)), key=lambda i: ((counts[i] + 1) / weights[i], i))
        if counts[part] == sizes[part]:
            return order
        order.append((part, counts[part]))
        counts[part] += 1


def relabelled(problem: Problem, index: int, part: str, split: str) -> Problem:
    """``problem`` at position ``index`` of the mixture's ``split`` (train or val), its part named in its
    metadata."""
    return Problem(index=index, prompt=problem.prompt, answer=problem.answer,
                   meta={**problem.meta, PART_KEY: part, "split": split, "part_index": problem.index})


def part_of(problem: Problem) -> Optional[str]:
    """The name of the mixture part ``problem`` belongs to; None for a problem of a single task."""
    return problem.meta.get(PART_KEY)


class MixtureTask:
    """The ``FormattedTask`` interface over several formatted tasks (module docstring)."""

    name = "mixture"

    def __init__(self, parts: Sequence[Part]):
        if len(parts) < 2:
            raise ValueError(f"task.name=mixture: mixture.parts needs at least two tasks, got {len(parts)}")
        self.parts: Dict[str, Part] = {p.name: p for p in parts}
        trains = [p.task.train_problems() for p in parts]
        order = interleave([len(t) for t in trains], [p.weight for p in parts])
        self._train = [relabelled(trains[part][i], k, parts[part].name, "train") for k, (part, i) in enumerate(order)]
        self._originals = {("train", k): trains[part][i] for k, (part, i) in enumerate(order)}
        self._val: List[Problem] = []
        for p in parts:
            for problem in p.task.val_problems():
                self._originals[("val", len(self._val))] = problem
                self._val.append(relabelled(problem, len(self._val), p.name, "val"))

    def train_problems(self) -> List[Problem]:
        return self._train

    def evenly_weighted(self) -> "MixtureTask":
        """The same parts at equal weights: what the embedded model's warm-up sees, so the parts' weights
        change the RL pool and never the starting policy."""
        return MixtureTask([replace(p, weight=1.0) for p in self.parts.values()])

    def val_problems(self) -> List[Problem]:
        return self._val

    def _source(self, problem: Problem) -> Tuple[FormattedTask, Problem]:
        """The part's task and the problem as that task knows it."""
        return self.parts[part_of(problem)].task, self._originals[(problem.meta["split"], problem.index)]

    def extract(self, problem: Problem, answer_text: str) -> Optional[str]:
        task, _ = self._source(problem)
        return task.extract(problem, answer_text)

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        task, original = self._source(problem)
        return task.is_correct(original, answer_text)

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        task, original = self._source(problem)
        return task.demonstration(original)
