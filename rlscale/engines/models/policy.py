"""Forward passes of a causal LM with the LM head in a chosen precision.

Section 3.2 ("FP32 precision at the LM head"): the generator's and the trainer's logits are computed
with an FP32 head (ScaleRL) or in bf16 (the baseline), which makes the two log-probabilities of the
same token disagree. Both the torch generator and the learner use ``head_output``: the head's matmul in
its precision; its float32 values are the logits.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def head_output(model, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """The head's matmul of final hidden states, in fp32 or in bf16 (its output in that dtype)."""
    return head_matmul(model.get_output_embeddings().weight, hidden, fp32_head)


def head_matmul(weight: torch.Tensor, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """``hidden @ weight.T`` in fp32 or in bf16."""
    if fp32_head:
        return F.linear(hidden.float(), weight.float())
    return F.linear(hidden.to(torch.bfloat16), weight.to(torch.bfloat16))


def head_logits(model, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """Logits (float32) from final hidden states; the matmul runs in fp32 or in bf16."""
    return head_output(model, hidden, fp32_head).float()


class SelectedLogprobs(torch.autograd.Function):
    """(log softmax(x * inv_temp) at ``target``, logsumexp(x * inv_temp)) for logits x [..., V] of any
    float dtype, computed in float32, without a [..., V] log-softmax tensor: the backward keeps only x
    (bf16 for the bf16 head) and the logsumexp, and writes dx = (onehot(target) - softmax) * g * inv_temp
    in x's dtype. The learner's full-vocabulary pass is memory-bound, so bytes are its time: the one-hot is a
    comparison with the position's target, not a scatter, so that compiled, the backward is one kernel that
    reads x and writes dx (a scatter kept a float32 [..., V] intermediate and a separate cast: 5.8 % of a
    Qwen2-0.5B learner update on an H200)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, target: torch.Tensor, inv_temp: float):
        z = scaled(x, inv_temp)
        lse = torch.logsumexp(z, -1)
        logp = z.gather(-1, target.unsqueeze(-1)).squeeze(-1) - lse
        ctx.save_for_backward(x, target, lse)
        ctx.inv_temp = inv_temp
        ctx.mark_non_differentiable(lse)
        return logp, lse

    @staticmethod
    def backward(ctx, g: torch.Tensor, _lse_grad: torch.Tensor):
        x, target, lse = ctx.saved_tensors
        onehot = (torch.arange(x.shape[-1], device=x.device) == target.unsqueeze(-1)).to(torch.uint8)
        grad = x.to(torch.float32, copy=True)  # in place from here: one float32 [..., V] buffer when eager
        if ctx.inv_temp != 1.0:
            grad.mul_(ctx.inv_temp)
        grad.sub_(lse.unsqueeze(-1)).exp_().sub_(onehot).mul_(-(g * ctx.inv_temp).unsqueeze(-1))
        return grad.to(x.dtype), None, None


def scaled(x: torch.Tensor, inv_temp: float) -> torch.Tensor:
    """x in float32 times 1 / T (no full-vocabulary multiply at T = 1)."""
    return x.float() * inv_temp if inv_temp != 1.0 else x.float()


@dataclass
class TokenLogprobs:
    """Per-position results for ``input_ids[:, 1:]``: log-prob of each next token [N, L-1] and the
    entropy of the predictive distribution [N, L-1]."""

    logp: torch.Tensor
    entropy: torch.Tensor


def token_logprobs(model, input_ids: torch.Tensor, fp32_head: bool, temperature: float = 1.0,
                   with_entropy: bool = False, head=None) -> TokenLogprobs:
    """Log-probabilities of each token given its prefix, under the sampling temperature, as the learner
    needs them. Rows are right-padded (``rlscale.train.batch``): under causal attention no real token
    sees the padding after it and positions count from 0, so no attention mask is passed, which lets
    SDPA take its fused causal kernels (flash attention on GPU). No KV cache is kept. Values at padding
    positions are meaningless and must be masked by the caller. ``head``: ``head_logprobs`` or a compiled
    copy of it."""
    hidden = model.model(input_ids=input_ids, use_cache=False).last_hidden_state
    weight = model.get_output_embeddings().weight
    return (head or head_logprobs)(weight, hidden[:, :-1], input_ids[:, 1:], fp32_head, 1.0 / temperature,
                                   with_entropy)


def head_logprobs(weight: torch.Tensor, hidden: torch.Tensor, targets: torch.Tensor, fp32_head: bool,
                  inv_temp: float, with_entropy: bool) -> TokenLogprobs:
    """The head's part of ``token_logprobs``: the matmul in its precision (``head_matmul``), the
    log-probability of each target and, with ``with_entropy``, the entropy (no gradient)."""
    out = head_matmul(weight, hidden, fp32_head)
    logp, lse = SelectedLogprobs.apply(out, targets, inv_temp)
    if with_entropy:
        with torch.no_grad():  # H = lse - sum softmax(z) z
            z = scaled(out, inv_temp)
            entropy = lse - (z - lse.unsqueeze(-1)).exp_().mul_(z).sum(-1)
    else:
        entropy = torch.zeros_like(logp)
    return TokenLogprobs(logp=logp, entropy=entropy)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
