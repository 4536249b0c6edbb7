"""Where training batches come from: prompts drawn from the curriculum pool, G completions each,
scored with +1/-1 rewards (Section 2), optionally refilled by DAPO dynamic sampling, and handed out by
an off-policy source (Section 3.1).
"""
from __future__ import annotations

from typing import Callable, List, Protocol

import torch

from rlscale.config.schema import FilteringConfig
from rlscale.core.protocols import Generator, PolicyTokenizer
from rlscale.core.types import Completion
from rlscale.rl import NoPositiveResamplingPool
from rlscale.rl.length import LengthConfig, RewardShaping
from rlscale.tasks.base import Problem, Task
from rlscale.train.batch import ScoredGroup
from rlscale.train.compute import ComputeMeter


def score_completion(task: Task, problem: Problem, completion: Completion) -> bool:
    """Correct when the answer (the text after ``</think>``, or the whole completion without thinking)
    verifies; a truncated trace has no answer."""
    if completion.truncated:
        return False
    answer = completion.answer
    return bool(answer) and task.is_correct(problem, answer)


def rewards_for(completions: List[Completion], correct: List[bool], shaping: RewardShaping,
                length_cfg: LengthConfig) -> List[float]:
    """+1 / -1, shaped by the length control's ``shaping`` (``length=penalty``: the DAPO overlong penalty on
    correct traces) with its config ``length_cfg``."""
    rewards = torch.tensor([1.0 if c else -1.0 for c in correct])
    lengths = torch.tensor([len(c.tokens) for c in completions])
    return shaping(rewards, lengths, torch.tensor(correct), length_cfg).tolist()


class RolloutSampler:
    """Draws prompts from the pool, generates ``generations`` completions for each, scores them, and
    feeds the pass rates back to the pool (No-Positive-Resampling history). ``shaping``: the reward shaping of
    the length control ``length`` (``rlscale.rl.length.LENGTHS``), resolved by the run's builder."""

    def __init__(self, task: Task, tok: PolicyTokenizer, generator: Generator, pool: NoPositiveResamplingPool,
                 generations: int, filtering: FilteringConfig, length: LengthConfig, shaping: RewardShaping,
                 rng: torch.Generator, meter: ComputeMeter):
        self.task, self.tok, self.generator, self.pool = task, tok, generator, pool
        self.problems = task.train_problems()
        self.generations = generations
        self.filtering = filtering
        self.length, self.shaping = length, shaping
        self.rng = rng
        self.meter = meter
        self.groups_generated = 0
        self.groups_with_signal = 0

    def sample(self, num_prompts: int, version: int, version_hook=None) -> List[ScoredGroup]:
        ids = self.pool.next_batch(num_prompts, self.rng)
        prompts = [p for p in self.encode(ids) for _ in range(self.generations)]
        completions = self.generator.generate(prompts, self.rng, version=version, version_hook=version_hook)
        return self.score(ids, completions)

    def encode(self, ids: List[int]) -> List[List[int]]:
        """The prompt tokens of the problems ``ids``, one list per prompt."""
        return [self.tok.encode_prompt(self.problems[i].prompt) for i in ids]

    def score(self, ids: List[int], completions: List[Completion]) -> List[ScoredGroup]:
        """Group the ``generations`` completions of each prompt (in ``ids`` order), score them, count
        the compute and feed the pass rates back to the pool."""
        self.meter.add_generation(sum(len(c.prompt_ids) for c in completions),
                                  sum(len(c.tokens) for c in completions), len(completions))
        groups = []
        for j, pid in enumerate(ids):
            comps = completions[j * self.generations:(j + 1) * self.generations]
            correct = [score_completion(self.task, self.problems[pid], c) for c in comps]
            groups.append(ScoredGroup(pid, comps, correct, rewards_for(comps, correct, self.shaping, self.length)))
        self.pool.update(ids, torch.tensor([g.correct for g in groups], dtype=torch.float))
        self.groups_generated += len(groups)
        self.groups_with_signal += sum(g.has_signal for g in groups)
        return groups

    def sample_batch(self, num_prompts: int, version: int) -> List[ScoredGroup]:
        return self.fill_batch(num_prompts, lambda n: self.sample(n, version))

    def fill_batch(self, num_prompts: int, draw: Callable[[int], List[ScoredGroup]]) -> List[ScoredGroup]:
        """``num_prompts`` groups from ``draw(n)`` (n new scored groups); with dynamic sampling,
        zero-variance groups are replaced by new draws for up to ``max_rounds`` extra rounds (DAPO),
        the rest filled with what was drawn last."""
        groups = draw(num_prompts)
        if not self.filtering.dynamic_sampling:
            return groups
        kept = [g for g in groups if g.has_signal]
        spare = [g for g in groups if not g.has_signal]
        for _ in range(self.filtering.max_rounds):
            if len(kept) >= num_prompts:
                break
            more = draw(num_prompts - len(kept))
            kept += [g for g in more if g.has_signal]
            spare = [g for g in more if not g.has_signal] + spare
        return (kept + spare)[:num_prompts]

    def take_signal_fraction(self) -> float:
        """Fraction of groups generated since the last call whose rewards were not all equal."""
        frac = self.groups_with_signal / max(1, self.groups_generated)
        self.groups_generated = self.groups_with_signal = 0
        return frac


class RolloutSource(Protocol):
    """What the training loop pulls batches from; PipelineRL and PPO-off-policy implement it."""

    def next_batch(self, version: int) -> List[ScoredGroup]:
        ...

    def after_update(self, model, version: int) -> None:
        ...

    def state_dict(self) -> dict:
        ...

    def load_state_dict(self, state: dict) -> None:
        ...

    def close(self) -> None:
        ...

    def metrics(self) -> dict:
        """Per-step pipeline metrics merged into the train line (``trainer_wait_s``,
        ``generator_idle_frac``, ...), counted since the previous call."""
        ...
