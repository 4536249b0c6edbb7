"""Data filtering (ScaleRL Section 3.2).

- Zero-variance filtering: a prompt whose G rewards are all identical has all-zero advantages and no
  learning signal; ScaleRL drops it from the loss (the effective batch gets smaller).
  ``zero_variance_keep`` says which sequences stay; the loop zeroes the mask rows of the others.
- DAPO dynamic sampling: instead, generate more prompts until the batch is full of prompts with signal.
  ``select_groups_with_signal`` says which groups qualify; the loop does the resampling.
- No-Positive-Resampling (NPR): each prompt's historical pass rate is kept; a prompt whose pass rate
  reaches the threshold (paper: 0.9) leaves the pool for good ("adaptive prompt filtering").
  ``NoPositiveResamplingPool`` with ``enabled=False`` is the baseline's uniform resampling.
"""
from __future__ import annotations

from typing import Any, Sequence, Union

import torch
from torch import Tensor

from rlscale.rl.groups import Groups


def _groups_with_signal(rewards: Tensor, group_ids: Tensor) -> tuple[Groups, Tensor]:
    """The groups and a [P] bool: the group's rewards are not all identical."""
    if rewards.shape != group_ids.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} must both "
                         "be [N]")
    groups = Groups.of(group_ids)
    return groups, groups.reduce(rewards, "amax") != groups.reduce(rewards, "amin")


def zero_variance_keep(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """[N] bool: False for every sequence of a group whose rewards are all identical.

    rewards: [N] float; group_ids: [N] long."""
    groups, signal = _groups_with_signal(rewards, group_ids)
    return signal[groups.index]


def select_groups_with_signal(rewards: Tensor, group_ids: Tensor) -> list[int]:
    """The ids (ascending) of the groups whose rewards are not all identical (DAPO dynamic sampling
    keeps these and resamples to refill the batch)."""
    groups, signal = _groups_with_signal(rewards, group_ids)
    return groups.ids[signal].tolist()


class PoolExhausted(RuntimeError):
    """No-Positive-Resampling has removed every prompt of the training set."""


class NoPositiveResamplingPool:
    """The training prompts 0..num_prompts-1, served in epochs, with No-Positive-Resampling.

    Each epoch shuffles the prompts still active with the caller's ``torch.Generator`` and walks
    through that order; a batch may run across an epoch boundary (so with fewer than n active prompts
    a batch repeats some). ``update`` adds each sample's correctness to its prompt's history; when a
    prompt's pass rate (mean correctness over all its samples so far) reaches ``threshold`` it is
    removed for good: skipped for the rest of the current epoch and absent from every later one. With ``enabled=False`` (uniform resampling) nothing is ever
    removed; the history is still kept.

    ``state_dict`` holds plain Python types (counts, removal flags, the epoch's order and position).
    Resuming from it together with the generator's state (``generator.get_state()``) yields exactly
    the batches an uninterrupted run would have.
    """

    def __init__(self, num_prompts: int, threshold: float = 0.9, enabled: bool = True) -> None:
        if num_prompts < 1:
            raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.num_prompts = num_prompts
        self.threshold = threshold
        self.enabled = enabled
        self._successes = [0.0] * num_prompts
        self._samples = [0] * num_prompts
        self._removed = [False] * num_prompts
        self._order: list[int] = []
        self._position = 0
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """Number of epochs started so far (1 during the first)."""
        return self._epoch

    def update(self, prompt_ids: Union[Sequence[int], Tensor], correct: Tensor) -> None:
        """Record N samples: ``prompt_ids`` [N] the prompt of each sample, ``correct`` [N] float in
        {0, 1} (1 = correct)."""
        ids = torch.as_tensor(prompt_ids).tolist()
        values = correct.tolist()
        if len(ids) != len(values):
            raise ValueError(f"{len(ids)} prompt ids for {len(values)} correctness values")
        if any(not 0.0 <= v <= 1.0 for v in values):
            raise ValueError("correct must be in {0, 1} (map +1/-1 rewards to 1/0 first)")
        if any(not 0 <= p < self.num_prompts for p in ids):
            raise ValueError(f"prompt ids must be in [0, {self.num_prompts})")
        for prompt, value in zip(ids, values):
            self._successes[prompt] += value
            self._samples[prompt] += 1
        if self.enabled:
            for prompt in set(ids):
                if self.pass_rate(prompt) >= self.threshold:
                    self._removed[prompt] = True

    def pass_rate(self, prompt_id: int) -> float:
        """Historical mean correctness of one prompt (0.0 before any sample)."""
        return self._successes[prompt_id] / max(self._samples[prompt_id], 1)

    def active(self) -> list[int]:
        """The prompts not removed, ascending."""
        return [p for p in range(self.num_prompts) if not self._removed[p]]

    def next_batch(self, n: int, generator: torch.Generator) -> list[int]:
        """The next ``n`` prompt ids; raises ``PoolExhausted`` when no prompt is left."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")
        batch: list[int] = []
        while len(batch) < n:
            if self._position == len(self._order):
                self._start_epoch(generator)
            prompt = self._order[self._position]
            self._position += 1
            if not self._removed[prompt]:
                batch.append(prompt)
        return batch

    def _start_epoch(self, generator: torch.Generator) -> None:
        active = self.active()
        if not active:
            raise PoolExhausted(f"No-Positive-Resampling removed all {self.num_prompts} prompts (pass rate "
                                f">= {self.threshold}); the training set is solved")
        self._order = [active[i] for i in torch.randperm(len(active), generator=generator).tolist()]
        self._position = 0
        self._epoch += 1

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (lists, ints, floats) for ``torch.save``."""
        return {"num_prompts": self.num_prompts, "successes": list(self._successes),
                "samples": list(self._samples), "removed": list(self._removed),
                "order": list(self._order), "position": self._position, "epoch": self._epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s output; the pool must have the same number of prompts."""
        if state["num_prompts"] != self.num_prompts:
            raise ValueError(f"state is for {state['num_prompts']} prompts, this pool has {self.num_prompts}")
        self._successes = list(state["successes"])
        self._samples = list(state["samples"])
        self._removed = list(state["removed"])
        self._order = list(state["order"])
        self._position = int(state["position"])
        self._epoch = int(state["epoch"])
