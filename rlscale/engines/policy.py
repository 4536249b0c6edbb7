"""Forward passes of a causal LM with the LM head in a chosen precision.

Section 3.2 ("FP32 precision at the LM head"): the generator's and the trainer's logits are computed
with an FP32 head (ScaleRL) or in bf16 (the baseline), which makes the two log-probabilities of the
same token disagree. Both the torch generator and the learner call ``head_logits``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def head_logits(model, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """Logits (float32) from final hidden states; the matmul runs in fp32 or in bf16."""
    weight = model.get_output_embeddings().weight
    if fp32_head:
        return F.linear(hidden.float(), weight.float())
    return F.linear(hidden.to(torch.bfloat16), weight.to(torch.bfloat16)).float()


@dataclass
class TokenLogprobs:
    """Per-position results for ``input_ids[:, 1:]``: log-prob of each next token [N, L-1] and the
    entropy of the predictive distribution [N, L-1]."""

    logp: torch.Tensor
    entropy: torch.Tensor


def token_logprobs(model, input_ids: torch.Tensor, fp32_head: bool, temperature: float = 1.0,
                   with_entropy: bool = False) -> TokenLogprobs:
    """Log-probabilities of each token given its prefix, under the sampling temperature, as the learner
    needs them. Rows are right-padded (``rlscale.train.batch``): under causal attention no real token
    sees the padding after it and positions count from 0, so no attention mask is passed, which lets
    SDPA take its fused causal kernels (flash attention on GPU). Values at padding positions are
    meaningless and must be masked by the caller."""
    hidden = model.model(input_ids=input_ids).last_hidden_state
    logits = head_logits(model, hidden[:, :-1], fp32_head)
    logits = logits / temperature if temperature != 1.0 else logits  # a full-vocabulary pass saved at T = 1
    logprobs = torch.log_softmax(logits, dim=-1)
    logp = logprobs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    if with_entropy:
        with torch.no_grad():
            entropy = -(logprobs.exp() * logprobs).sum(-1)
    else:
        entropy = torch.zeros_like(logp)
    return TokenLogprobs(logp=logp, entropy=entropy)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
