"""Forward passes of a causal LM with the LM head in a chosen precision.

Section 3.2 ("FP32 precision at the LM head"): the generator's and the trainer's logits are computed
with an FP32 head (ScaleRL) or in bf16 (the baseline), which makes the two log-probabilities of the
same token disagree. Both the torch generator and the learner use ``head_output``: the head's matmul in
its precision; its float32 values are the logits. The learner runs the head over chunks of positions
(``chunked_head_logprobs``), so long sequences never hold the whole [positions x vocabulary] logits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def head_output(model, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """The head's matmul of final hidden states, in fp32 or in bf16 (its output in that dtype)."""
    return head_matmul(model.get_output_embeddings().weight, hidden, fp32_head)


def head_matmul(weight: torch.Tensor, hidden: torch.Tensor, fp32_head: bool) -> torch.Tensor:
    """``hidden @ weight.T``: FP32-accurate with a float32 output (``fp32_head_matmul``), or in bf16."""
    if fp32_head:
        return fp32_head_matmul(weight, hidden)
    return F.linear(hidden.to(torch.bfloat16), weight.to(torch.bfloat16))


def fp32_head_matmul(weight: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """The FP32 head of Section 3.2, float32 logits. Weights stored in float32 take a float32 GEMM. Weights
    stored in bf16 are exact in float32, and so is the product of two bf16 numbers, so bf16 GEMMs that accumulate
    and write in float32 (tensor cores, the weights read once in bf16) compute the float32 GEMM's sums, up to
    summation order, once the hidden state is exact in bf16: a bf16 hidden state is; a float32 one is split
    into three bf16 parts that carry its 24 significand bits (``bf16_parts``), stacked into one GEMM. The
    backward takes the bf16 head's precision: the gradient of the logits in bf16, products accumulated in
    float32 (``Fp32Head``)."""
    if weight.dtype != torch.bfloat16:
        return F.linear(hidden.float(), weight.float())
    return Fp32Head.apply(hidden, weight)


class Fp32Head(torch.autograd.Function):
    """``hidden @ weight.T`` for bf16 weights in float32 (``fp32_head_matmul``): forward on the bf16 parts of the
    hidden state (stacked into one GEMM, so the weights are read once); backward
    dh = bf16(g) @ W and dW = bf16(g).T @ bf16(h), accumulated in float32, cast to the inputs' dtypes."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor):
        ctx.save_for_backward(hidden, weight)
        rows = hidden.reshape(-1, hidden.shape[-1])
        parts = bf16_parts(rows)
        out = bf16_mm_f32(torch.cat(parts) if len(parts) > 1 else parts[0], weight.t())
        out = sum(out.chunk(len(parts))) if len(parts) > 1 else out
        return out.reshape(*hidden.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        hidden, weight = ctx.saved_tensors
        g2 = g.reshape(-1, g.shape[-1]).to(torch.bfloat16)
        grad_hidden = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_hidden = bf16_mm_f32(g2, weight).reshape(hidden.shape).to(hidden.dtype)
        if ctx.needs_input_grad[1]:
            rows = hidden.reshape(-1, hidden.shape[-1]).to(torch.bfloat16)
            grad_weight = bf16_mm_f32(g2.t(), rows).to(weight.dtype)
        return grad_hidden, grad_weight


def bf16_parts(x: torch.Tensor) -> List[torch.Tensor]:
    """bf16 tensors that sum to ``x`` in float32: ``x`` itself when it is bf16; for a float32 ``x``, hi = bf16(x)
    and two remainders, each the bf16 rounding of what the parts before it leave (8 significand bits each, 24 in
    all: float32's)."""
    if x.dtype == torch.bfloat16:
        return [x]
    parts, rest = [], x.float()
    for _ in range(3):
        parts.append(rest.to(torch.bfloat16))
        rest = rest - parts[-1].float()
    return parts


def bf16_mm_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` of bf16 matrices, accumulated and returned in float32: one cuBLAS GEMM on CUDA
    (``torch.mm(..., out_dtype=float32)``); elsewhere the same sums by a float32 GEMM of the bf16 values (every
    product of two bf16 numbers is exact in float32)."""
    if a.is_cuda and MM_OUT_DTYPE_ON_CUDA:
        return torch.mm(a, b, out_dtype=torch.float32)
    return a.float() @ b.float()


# whether this torch has the CUDA GEMM of bf16 inputs with a float32 output (aten::mm.dtype); read from the
# dispatcher, so importing this module starts no CUDA context
MM_OUT_DTYPE_ON_CUDA = torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm.dtype", "CUDA")


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
                   with_entropy: bool = False, head=None, chunk: int = 0) -> TokenLogprobs:
    """Log-probabilities of each token given its prefix, under the sampling temperature, as the learner
    needs them. Rows are right-padded (``rlscale.train.batch``): under causal attention no real token
    sees the padding after it and positions count from 0, so no attention mask is passed, which lets
    SDPA take its fused causal kernels (flash attention on GPU). No KV cache is kept. Values at padding
    positions are meaningless and must be masked by the caller. ``head``: ``head_logprobs`` or a compiled
    copy of it; ``chunk``: positions per pass of the head (``chunked_head_logprobs``; 0 = all at once)."""
    hidden = model.model(input_ids=input_ids, use_cache=False).last_hidden_state
    weight = model.get_output_embeddings().weight
    return chunked_head_logprobs(weight, hidden[:, :-1], input_ids[:, 1:], fp32_head, 1.0 / temperature,
                                 with_entropy, chunk, head)


def chunked_head_logprobs(weight: torch.Tensor, hidden: torch.Tensor, targets: torch.Tensor, fp32_head: bool,
                          inv_temp: float, with_entropy: bool, chunk: int, head=None) -> TokenLogprobs:
    """``head`` (``head_logprobs`` or a compiled copy) over ``chunk`` positions at a time, so that the
    [positions, V] logits (float32 with the FP32 head) and their gradient exist for one chunk at a time rather
    than for the whole micro-batch (16.8 GiB for one 14,865-token sequence of Qwen3-8B's 152k vocabulary).
    Under autograd each chunk is a non-reentrant checkpoint (``torch.utils.checkpoint``): it keeps only its
    inputs, and its backward recomputes the chunk's logits (the head's matmul once more, in its precision) and
    logsumexp to form their gradient. Each position's log-prob, entropy and hidden-state gradient are those of
    the whole pass, up to the summation order of the GEMMs; the head weight's gradient is summed over the
    chunks in the weight's dtype. With ``chunk`` 0, or no more positions than ``chunk``, this is ``head`` on all
    positions at once."""
    head = head or head_logprobs
    width = hidden.shape[-1]
    if chunk <= 0 or targets.numel() <= chunk:
        return head(weight, hidden, targets, fp32_head, inv_temp, with_entropy)
    parts = []
    for rows, ids in zip(hidden.reshape(-1, width).split(chunk), targets.reshape(-1).split(chunk)):
        if torch.is_grad_enabled():
            parts.append(checkpoint(head, weight, rows, ids, fp32_head, inv_temp, with_entropy, use_reentrant=False))
        else:
            parts.append(head(weight, rows, ids, fp32_head, inv_temp, with_entropy))
    return TokenLogprobs(logp=torch.cat([p.logp for p in parts]).reshape(targets.shape),
                         entropy=torch.cat([p.entropy for p in parts]).reshape(targets.shape))


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


def checkpoint_layers(model) -> None:
    """Activation checkpointing of ``model``'s decoder layers (transformers' ``gradient_checkpointing_enable``:
    a non-reentrant ``torch.utils.checkpoint`` per layer), in place: in training mode each layer keeps only its
    input for the backward, where its forward runs again; in eval mode (the generator's passes) nothing changes.
    The embeddings are trained, so the hook that makes their output require a gradient (for frozen
    embeddings) is removed."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.disable_input_require_grads()


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
