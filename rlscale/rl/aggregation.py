"""Loss aggregation: how per-token losses become one scalar (ScaleRL Section 3.2, "Loss aggregation").

``aggregation_weights`` returns W [N, T] with loss = (W * per_token).sum(). W is computed ONCE over
the whole optimizer batch, so its denominators are global: for any split of the batch into
micro-batches, sum over micro-batches of (W[mb] * per_token[mb]).sum() is the same loss, with the
same gradient, as the whole batch. Gradient accumulation never changes the objective.

With |y_i| the number of masked tokens of sequence i:

- ``token``:  W_it = mask_it / sum_j |y_j|  (every token of the batch counts the same; DAPO).
- ``sample``: W_it = mask_it / (S |y_i|), S = number of sequences with |y_i| >= 1 (the mean over
  sequences of each one's token mean; GRPO, the Section-2 baseline).
- ``prompt``: W_it = mask_it / (P sum_{j in g(i)} |y_j|), P = number of groups with at least one
  masked token (the token mean within each prompt's group, then the mean over prompts; ScaleRL).

Sequences with no masked token (e.g. zero-variance filtered ones, whose mask rows are zeroed) get
zero weight and count in no denominator; a batch with no masked token gets W = 0.
"""
from __future__ import annotations

from typing import Callable, Dict

import torch
from torch import Tensor

from rlscale.rl.groups import Groups

Denominator = Callable[[Tensor, Groups], Tensor]


def token_denominator(lengths: Tensor, groups: Groups) -> Tensor:
    """mean over all tokens of the batch (DAPO)

    [N] the masked tokens of the whole batch, for every sequence."""
    return lengths.sum().expand_as(lengths)


def sample_denominator(lengths: Tensor, groups: Groups) -> Tensor:
    """token mean of each sequence, then mean over sequences (Section-2 baseline)

    [N] S |y_i|."""
    return lengths * (lengths > 0).sum()


def prompt_denominator(lengths: Tensor, groups: Groups) -> Tensor:
    """token mean within each prompt's group, then mean over prompts (ScaleRL, Sec. 3.2)

    [N] P times the masked tokens of the sequence's group."""
    group_lengths = groups.sum(lengths)
    return group_lengths[groups.index] * (group_lengths > 0).sum()


AGGREGATIONS: Dict[str, Denominator] = {"prompt": prompt_denominator, "sample": sample_denominator,
                                        "token": token_denominator}
"""Each ``aggregation.name``: (masked tokens per sequence, groups) -> the denominator of each sequence."""


def aggregation_weights(mask: Tensor, group_ids: Tensor, denominator_of: Denominator) -> Tensor:
    """Weights W [N, T] such that loss = (W * per_token).sum() (module docstring).

    mask:      [N, T] float, 1 = token in the loss.
    group_ids: [N] long, the prompt group of each sequence.
    denominator_of: one of ``AGGREGATIONS``, resolved by the run's builder.
    Returns [N, T], the dtype and device of ``mask``, no grad.
    """
    if mask.dim() != 2 or group_ids.shape != mask.shape[:1]:
        raise ValueError(f"mask must be [N, T] and group_ids [N], got {tuple(mask.shape)} and "
                         f"{tuple(group_ids.shape)}")
    mask = mask.detach()
    denominator = denominator_of(mask.sum(-1), Groups.of(group_ids))
    inverse = torch.where(denominator > 0, denominator.reciprocal(), torch.zeros_like(denominator))
    return mask * inverse.unsqueeze(-1)
