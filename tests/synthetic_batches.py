"""Learner batches for tests: rows of given lengths, right-padded as ``rlscale.train.batch.collate`` pads
them, with generator log-probs that are the model's own plus noise (an off-policy generator)."""
from __future__ import annotations

from typing import List

import torch

from rlscale.core.types import TrainBatch
from rlscale.engines.models.policy import token_logprobs


def off_policy_batch(model, lengths: List[int], prompt_len: int, vocab: int, seed: int, noise: float,
                     rewards: List[float], groups: List[int], fp32_head: bool = True,
                     temperature: float = 1.0) -> TrainBatch:
    """Token ids drawn from [3, vocab), padded with id 0; the loss mask covers every token after the first
    ``prompt_len``; generator log-probs = the model's (head precision and temperature as given) plus
    ``noise`` times a standard normal draw."""
    gen = torch.Generator().manual_seed(seed)
    n, width = len(lengths), max(lengths)
    ids = torch.zeros((n, width), dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width - 1))
    for row, length in enumerate(lengths):
        ids[row, :length] = torch.randint(3, vocab, (length,), generator=gen)
        attention[row, :length] = 1
        mask[row, prompt_len - 1:length - 1] = 1.0
    with torch.no_grad():
        own = token_logprobs(model, ids, fp32_head, temperature).logp
    gen_logp = (own + noise * torch.randn(own.shape, generator=gen)) * mask
    return TrainBatch(ids, attention, gen_logp, mask, torch.zeros_like(ids[:, 1:]), torch.tensor(rewards),
                      torch.tensor(groups))
