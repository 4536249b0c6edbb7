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

from typing import Literal

from torch import Tensor

from rlscale.rl.groups import Groups

Normalization = Literal["batch", "group", "none"]
NORMALIZATIONS: tuple[str, ...] = ("batch", "group", "none")


def compute_advantages(rewards: Tensor, group_ids: Tensor, normalization: str,
                       eps: float = 1e-6) -> Tensor:
    """Advantages of N sequences.

    rewards:       [N] float, one scalar reward per sequence.
    group_ids:     [N] long, the prompt group of each sequence.
    normalization: "batch" | "group" | "none" (see the module docstring).
    Returns [N], the dtype and device of ``rewards``.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization '{normalization}' is not one of {', '.join(NORMALIZATIONS)}")
    if rewards.shape != group_ids.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} must both "
                         "be [N]")
    groups = Groups.of(group_ids)
    centered = rewards - groups.mean(rewards)[groups.index]
    if normalization == "group":
        group_std = groups.mean(centered.square()).sqrt()
        return centered / (group_std[groups.index] + eps)
    if normalization == "batch":
        return centered / (centered.std(unbiased=False) + eps)
    return centered
