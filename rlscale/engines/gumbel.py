"""Sampling from softmax(logits / T) by the Gumbel-max trick, with counter-based noise.

The draw is argmax_v (logits_v / T + g_v) with g_v = -log(-log(u_v)), which is an exact sample of the
categorical distribution. The uniforms u come from an integer hash of (seed, row, column) (two rounds of
the "lowbias32" mixer), so they need no generator state: the same seed gives the same draws on any
device, inside a CUDA graph too (the seed is a device tensor the graph reads). u has 24 random bits,
which caps the noise at about 17: a token more than ~17 nats below the best one is never drawn
(probability under 1e-7 per draw).

``gumbel_sample`` also returns logsumexp(logits / T), so the log-probability of any token (the drawn one
or a forced one) is one gather away: log pi(v) = logits_v / T - lse (the generator's logprob of
Section 3.2). On CUDA with Triton one kernel reads the logits once and does both; elsewhere torch ops
compute the same function.
"""
from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
MIX1, MIX2, GOLDEN = 0x7FEB352D, 0x846CA68B, 0x9E3779B9

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the torch version below is used
    triton = None


def _mix(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding 32-bit values (products wrap; the low 32 bits are kept)."""
    x = x ^ (x >> 16)
    x = (x * MIX1) & MASK32
    x = x ^ (x >> 15)
    x = (x * MIX2) & MASK32
    return x ^ (x >> 16)


def uniforms(seed: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """u [rows, cols] in (0, 1): 24 bits of hash(hash(seed) + row * cols + col), plus half a step."""
    key = _mix(seed.long() & MASK32)
    counter = torch.arange(rows * cols, device=seed.device, dtype=torch.long).view(rows, cols)
    bits = _mix((counter + key) & MASK32) >> 8
    return (bits.float() + 0.5) * (1.0 / (1 << 24))


def gumbel_sample_torch(logits: torch.Tensor, inv_temp: float, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(draw [B] long, lse [B] float32) with torch ops; ``seed`` is a [1] integer tensor."""
    scaled = logits.float() * inv_temp
    noise = -torch.log(-torch.log(uniforms(seed, *scaled.shape)))
    return (scaled + noise).argmax(-1), torch.logsumexp(scaled, -1)


if triton is not None:
    @triton.jit
    def _mix_tl(x):
        x = x ^ (x >> 16)
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x = x ^ (x >> 15)
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    @triton.jit
    def _gumbel_kernel(logits_ptr, stride, seed_ptr, draw_ptr, lse_ptr, inv_temp, cols: tl.constexpr,
                       BLOCK: tl.constexpr):
        row = tl.program_id(0)
        key = _mix_tl(tl.load(seed_ptr).to(tl.int64) & 0xFFFFFFFF)
        lanes = tl.arange(0, BLOCK)
        run_max = tl.full([BLOCK], float("-inf"), tl.float32)
        run_sum = tl.zeros([BLOCK], tl.float32)
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        best_col = tl.zeros([BLOCK], tl.int64)
        for start in range(0, cols, BLOCK):
            col = start + lanes
            valid = col < cols
            x = tl.load(logits_ptr + row.to(tl.int64) * stride + col, mask=valid,
                        other=float("-inf")).to(tl.float32) * inv_temp
            new_max = tl.maximum(run_max, x)
            shift = tl.where(new_max == float("-inf"), 0.0, new_max)
            run_sum = run_sum * tl.exp(run_max - shift) + tl.exp(x - shift)
            run_max = new_max
            counter = row.to(tl.int64) * cols + col
            bits = _mix_tl((counter + key) & 0xFFFFFFFF) >> 8
            u = (bits.to(tl.float32) + 0.5) * (1.0 / 16777216.0)
            score = tl.where(valid, x - tl.log(-tl.log(u)), float("-inf"))
            better = score > best
            best_col = tl.where(better, col.to(tl.int64), best_col)
            best = tl.where(better, score, best)
        top = tl.max(best, 0)
        draw = tl.min(tl.where(best == top, best_col, cols), 0)
        row_max = tl.max(run_max, 0)
        total = tl.sum(run_sum * tl.exp(run_max - row_max), 0)
        tl.store(draw_ptr + row, draw)
        tl.store(lse_ptr + row, row_max + tl.log(total))


def gumbel_sample(logits: torch.Tensor, inv_temp: float, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(draw [B] long, lse [B] float32) for ``logits`` [B, V]; one fused kernel on CUDA with Triton."""
    if triton is None or not logits.is_cuda:
        return gumbel_sample_torch(logits, inv_temp, seed)
    rows, cols = logits.shape
    draw = torch.empty(rows, dtype=torch.long, device=logits.device)
    lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
    _gumbel_kernel[(rows,)](logits, logits.stride(0), seed, draw, lse, inv_temp, cols=cols, BLOCK=2048, num_warps=8)
    return draw, lse
