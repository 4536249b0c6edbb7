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

Each normalization's config class is the annotation of its ``cfg`` argument: ``StdConfig`` (batch, with ``eps``),
``GroupStdConfig`` (group) and ``NormalizationConfig`` (none, no knob); the run's ``normalization`` section is typed
by it when the config is composed (``rlscale.config.compose``), so ``normalization.eps`` beside none is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

from torch import Tensor

from rlscale.knobs import knob
from rlscale.rl.groups import Groups

NORMALIZATION_NAME = "the advantage normalization (``normalization=NAME``)"


@dataclass
class NormalizationConfig:
    """Advantage normalization of A_i = r_i - mean(group) (Sec. 3.2)."""

    name: str = knob("none", NORMALIZATION_NAME, "Sec. 3.2")


@dataclass
class StdConfig(NormalizationConfig):
    """Division by a standard deviation of the batch's advantages, kept finite by ``eps``."""

    name: str = knob("batch", NORMALIZATION_NAME, "Sec. 3.2")
    eps: float = knob(1.0e-6, "added to the std, so a zero-variance group gets advantage 0", ge=0)


@dataclass
class GroupStdConfig(StdConfig):
    """Division by the std of each prompt's own group (GRPO)."""

    name: str = knob("group", NORMALIZATION_NAME, "Sec. 3.2")


Normalization = Callable[[Tensor, Groups, NormalizationConfig], Tensor]


def by_group(centered: Tensor, groups: Groups, cfg: GroupStdConfig) -> Tensor:
    """A_i / (std of the prompt's group + eps) (GRPO, Section-2 baseline)"""
    return centered / (groups.mean(centered.square()).sqrt()[groups.index] + cfg.eps)


def by_batch(centered: Tensor, groups: Groups, cfg: StdConfig) -> Tensor:
    """A_i / std of all advantages of the batch (ScaleRL, Sec. 3.2)"""
    return centered / (centered.std(unbiased=False) + cfg.eps)


def unscaled(centered: Tensor, groups: Groups, cfg: NormalizationConfig) -> Tensor:
    """A_i = r_i - mean(group), not divided (Dr. GRPO)"""
    return centered


NORMALIZATIONS: Dict[str, Normalization] = {"batch": by_batch, "group": by_group, "none": unscaled}
"""Each ``normalization.name``: (centered advantages, groups, its config) -> advantages."""


def compute_advantages(rewards: Tensor, group_ids: Tensor, normalize: Normalization,
                       cfg: NormalizationConfig) -> Tensor:
    """Advantages of N sequences.

    rewards:   [N] float, one scalar reward per sequence.
    group_ids: [N] long, the prompt group of each sequence.
    normalize: one of ``NORMALIZATIONS`` (see the module docstring), resolved by the run's builder.
    cfg:       its config (the run's ``normalization`` section).
    Returns [N], the dtype and device of ``rewards``.
    """
    if rewards.shape != group_ids.shape or rewards.dim() != 1:
        raise ValueError(f"rewards {tuple(rewards.shape)} and group_ids {tuple(group_ids.shape)} must both "
                         "be [N]")
    groups = Groups.of(group_ids)
    centered = rewards - groups.mean(rewards)[groups.index]
    return normalize(centered, groups, cfg)
