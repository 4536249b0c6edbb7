"""Group-relative advantages with the three normalizations of ScaleRL Section 3.2 ("Advantage
normalization").

Every sequence gets one scalar advantage A_i = r_i - mean(rewards of its prompt group) (GRPO's
group baseline, Section 2). Normalization then divides it by:

- ``group``: the standard deviation of the rewards of its own group (prompt-level, GRPO; the
  Section-2 baseline);
- ``batch``: the standard deviation of all A_i in the batch (batch-level; the ScaleRL recipe);
- ``none``: nothing (Dr. GRPO).

All standard deviations are population ones (``unbiased=False``, divide by the count, not count - 1),
so a group of two rewards {1, -1} has std 1. ``eps`` keeps a zero-variance group finite: its A_i are
exactly 0, and 0 / (0 + eps) = 0.

Batch normalization uses whatever sequences are passed: to take the std over the sequences that reach
the loss only (e.g. after zero-variance filtering), pass only those.
"""
from __future__ import annotations

from typing import Callable, Dict

from torch import Tensor

from rlscale.rl.groups import Groups

Normalization = Callable[[Tensor, Groups, float], Tensor]


def by_group(centered: Tensor, groups: Groups, eps: float) -> Tensor:
    """A_i / (std of the prompt's group + eps) (GRPO, Section-2 baseline)"""
    return centered / (groups.mean(centered.square()).sqrt()[groups.index] + eps)


def by_batch(centered: Tensor, groups: Groups, eps: float) -> Tensor:
    """A_i / std of all advantages of the batch (ScaleRL, Sec. 3.2)"""
    return centered / (centered.std(unbiased=False) + eps)


def unscaled(centered: Tensor, groups: Groups, eps: float) -> Tensor:
    """A_i = r_i - mean(group), not divided (Dr. GRPO)"""
    return centered


NORMALIZATIONS: Dict[str, Normalization] = {"batch": by_batch, "group": by_group, "none": unscaled}
"""Each ``normalization.name``: (centered advantages, groups, eps) -> advantages."""


def compute_advantages(rewards: Tensor, group_ids: Tensor, normalize: Normalization, eps: float = 1e-6) -> Tensor:
    """Advantages of N sequences.

    rewards:   [N] float, one scalar reward per sequence.
    group_ids: [N] long, the prompt group of each sequence.
    normalize: one of ``NORMALIZATIONS`` (see the module docstring), resolved by the run's builder.
    Returns [N], the dtype and device of ``rewards``.
    """
    if rewards.shape != group_ids.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} must both "
                         "be [N]")
    groups = Groups.of(group_ids)
    centered = rewards - groups.mean(rewards)[groups.index]
    return normalize(centered, groups, eps)
