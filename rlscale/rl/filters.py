"""Data filtering (ScaleRL Section 3.2).

- Zero-variance filtering: a prompt whose G rewards are all identical has all-zero advantages and no
  learning signal; ScaleRL drops it from the loss (the effective batch gets smaller).
  ``zero_variance_keep`` says which sequences stay; the loop zeroes the mask rows of the others.
- DAPO dynamic sampling: instead, generate more prompts until the batch is full of prompts with signal.
  ``select_groups_with_signal`` says which groups qualify; the loop does the resampling.

The curriculum over the training pool (No-Positive-Resampling) is rlscale.rl.curriculum.
"""
from __future__ import annotations

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
