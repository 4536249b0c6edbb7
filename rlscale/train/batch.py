"""From scored completions to the tensors the learner trains on.

Rows are prompt + completion, right-padded to a common length L; every per-token tensor is aligned to
``input_ids[:, 1:]`` ([N, L-1]), so position j holds the log-probability of token j+1. The loss mask is
1 only on completion tokens the generator sampled (forced interruption tokens are excluded) of rows
kept by the filters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import torch

from rlscale.core.types import Completion, TrainBatch


@dataclass
class ScoredGroup:
    """The G completions of one prompt with their rewards (+1/-1, plus any length penalty)."""

    prompt_index: int
    completions: List[Completion]
    correct: List[bool]
    rewards: List[float]

    @property
    def has_signal(self) -> bool:
        return len(set(self.rewards)) > 1


def collate(groups: List[ScoredGroup], pad_id: int) -> TrainBatch:
    seqs = [(g_i, c, r) for g_i, g in enumerate(groups) for c, r in zip(g.completions, g.rewards)]
    width = max(len(c.prompt_ids) + len(c.tokens) for _, c, _ in seqs)
    n = len(seqs)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    gen_logp = torch.zeros((n, width - 1))
    mask = torch.zeros((n, width - 1))
    versions = torch.full((n, width - 1), -1, dtype=torch.long)
    for row, (_, c, _) in enumerate(seqs):
        p, t = len(c.prompt_ids), len(c.tokens)
        input_ids[row, : p + t] = torch.tensor(c.prompt_ids + c.tokens, dtype=torch.long)
        attention[row, : p + t] = 1
        span = slice(p - 1, p - 1 + t)
        gen_logp[row, span] = torch.tensor(c.gen_logp)
        mask[row, span] = torch.tensor(c.sampled, dtype=torch.float)
        versions[row, span] = torch.tensor(c.versions, dtype=torch.long)
    rewards = torch.tensor([r for _, _, r in seqs], dtype=torch.float)
    group_ids = torch.tensor([g_i for g_i, _, _ in seqs], dtype=torch.long)
    return TrainBatch(input_ids, attention, gen_logp, mask, versions, rewards, group_ids)
