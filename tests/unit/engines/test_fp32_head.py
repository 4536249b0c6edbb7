"""The FP32 head of Section 3.2 on bf16 weights (rlscale.engines.models.policy.fp32_head_matmul): bf16 GEMMs
that accumulate in float32 give the float32 head's log-probabilities, not the bf16 head's, and the bf16 head's
gradients. On CPU the GEMMs are float32 GEMMs of the bf16 values, the same sums a CUDA bf16 GEMM with a float32
output computes."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from rlscale.engines.models.policy import bf16_parts, fp32_head_matmul

VOCAB, WIDTH, ROWS = 8192, 576, 128  # SmolLM2-135M's width, a slice of its vocabulary


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    weight = (torch.randn(VOCAB, WIDTH, generator=g) * 0.05).to(torch.bfloat16)
    hidden = torch.randn(ROWS, WIDTH, generator=g) * 2
    return weight, hidden


def _logp_error(logits: torch.Tensor, weight: torch.Tensor, hidden: torch.Tensor) -> float:
    """max |log softmax - the float64 head's|."""
    exact = torch.log_softmax(hidden.double() @ weight.double().t(), -1)
    return (torch.log_softmax(logits.double(), -1) - exact).abs().max().item()


def test_a_float32_hidden_state_gets_the_float32_heads_accuracy():
    weight, hidden = _inputs()
    fp32 = _logp_error(F.linear(hidden, weight.float()), weight, hidden)
    split = _logp_error(fp32_head_matmul(weight, hidden), weight, hidden)
    bf16 = _logp_error(F.linear(hidden.to(torch.bfloat16), weight).float(), weight, hidden)
    assert fp32 < 2e-5 and bf16 > 1e-2  # 6.6e-6 and 4.5e-2 on this draw
    assert split <= 2 * fp32  # 3.5e-6: the three bf16 parts carry all 24 bits
    parts = bf16_parts(hidden)
    assert [p.dtype for p in parts] == [torch.bfloat16] * 3
    assert torch.equal(sum(p.float() for p in parts), hidden)  # exact: 8 + 8 + 8 significand bits


def test_a_bf16_hidden_state_is_one_gemm_with_the_float32_sums():
    weight, hidden = _inputs(1)
    hidden = hidden.to(torch.bfloat16)
    out = fp32_head_matmul(weight, hidden.reshape(2, ROWS // 2, WIDTH))
    assert out.dtype == torch.float32 and out.shape == (2, ROWS // 2, VOCAB)
    torch.testing.assert_close(out.reshape(ROWS, VOCAB), F.linear(hidden.float(), weight.float()), rtol=0, atol=1e-5)


def test_float32_weights_take_the_float32_gemm():
    weight, hidden = _inputs(2)
    assert torch.equal(fp32_head_matmul(weight.float(), hidden), F.linear(hidden, weight.float()))


def test_gradients_are_the_bf16_heads():
    """dh = bf16(g) @ W and dW = bf16(g).T @ bf16(h) in float32: within bf16 rounding of the float32 head's
    gradients, and the dtypes of the inputs."""
    weight, hidden = _inputs(3)
    g = torch.Generator().manual_seed(4)
    upstream = torch.randn(ROWS, VOCAB, generator=g)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    (fp32_head_matmul(w, h) * upstream).sum().backward()
    h_ref, w_ref = hidden.clone().requires_grad_(), weight.float().requires_grad_()
    (F.linear(h_ref, w_ref) * upstream).sum().backward()
    assert h.grad.dtype == torch.float32 and w.grad.dtype == torch.bfloat16
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=2e-2, atol=2e-2 * h_ref.grad.abs().max().item())
    torch.testing.assert_close(w.grad.float(), w_ref.grad, rtol=2e-2, atol=2e-2 * w_ref.grad.abs().max().item())
