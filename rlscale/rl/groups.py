"""Per-prompt group reductions shared by advantages, aggregation and filters.

A batch holds N sequences; ``group_ids[i]`` names the prompt that sequence i answers (its "group" of G
generations, ScaleRL Section 2). Ids are arbitrary integers, in any order; sequences of one group need
not be adjacent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor


@dataclass(frozen=True)
class Groups:
    """Dense view of ``group_ids``.

    ids:   [P] long, the distinct group ids, sorted ascending.
    index: [N] long, ``ids[index[i]] == group_ids[i]``.
    """

    ids: Tensor
    index: Tensor

    @classmethod
    def of(cls, group_ids: Tensor) -> "Groups":
        """Groups of a [N] integer tensor of group ids."""
        if group_ids.dim() != 1:
            raise ValueError(f"group_ids must be 1-D [N], got shape {tuple(group_ids.shape)}")
        ids, index = torch.unique(group_ids, sorted=True, return_inverse=True)
        return cls(ids=ids, index=index)

    @property
    def count(self) -> int:
        """P, the number of distinct groups."""
        return self.ids.numel()

    def sum(self, values: Tensor) -> Tensor:
        """[N] -> [P]: the sum of ``values`` over each group's sequences."""
        return values.new_zeros(self.count).index_add(0, self.index, values)

    def mean(self, values: Tensor) -> Tensor:
        """[N] -> [P]: the mean of ``values`` over each group's sequences."""
        return self.sum(values) / self.sum(torch.ones_like(values))

    def reduce(self, values: Tensor, how: Literal["amax", "amin"]) -> Tensor:
        """[N] -> [P]: ``how`` in {"amax", "amin"} over each group's sequences."""
        return values.new_zeros(self.count).scatter_reduce(0, self.index, values, reduce=how,
                                                           include_self=False)
