"""Sampling from softmax(logits / T) by the Gumbel-max trick, with counter-based noise.

The draw is argmax_v (logits_v / T + g_v) with g_v = -log(-log(u_v)), which is an exact sample of the
categorical distribution. The uniforms u come from an integer hash of (seed, row, column) (two rounds of
the "lowbias32" mixer), so they need no generator state: the same seed gives the same draws on any
device (up to near-ties, see ``FAST_LOG``), inside a CUDA graph too (the seed is a device tensor the graph
reads). u = (b + 1/2) / 2^23 for 23 random bits b, exact in float32 and so strictly inside (0, 1). (With
24 bits, b + 1/2 rounded to 2^24 for b = 2^24 - 1: u = 1, infinite noise, and a uniformly random token
drawn in ~0.9 % of the draws over a 152k vocabulary.) The largest noise is -log(-log(1 - 2^-24)) = 16.6:
a token more than ~17 nats below the best one is never drawn (probability under 1e-7 per draw).

``gumbel_sample`` also returns logsumexp(logits / T), so the log-probability of any token (the drawn one
or a forced one) is one gather away: log pi(v) = logits_v / T - lse (the generator's logprob of
Section 3.2). On CUDA with Triton, kernels read the logits once and do both (partials per chunk of
columns, then one combine per row); elsewhere torch ops compute the same function.
"""
from __future__ import annotations

import os

import torch

MASK32 = 0xFFFFFFFF
UNIFORM_BITS = 23  # b + 1/2 needs 24 significant bits: exact in float32
MIX1, MIX2, GOLDEN = 0x7FEB352D, 0x846CA68B, 0x9E3779B9

try:
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
except ImportError:  # CPU-only installs: the torch version below is used
    triton = None

# The kernel's logarithms use the hardware approximation (``lg2.approx``, absolute error ~1e-7) rather than
# the accurate ``logf``, except where that error would be large relative to the result: -log(u) for u near 1
# (the largest noise, the draws that win) comes from its series in 1 - u. The noise then differs from the
# torch version's by ~1e-6, which changes a draw only when a row's two best scores are that close. Triton's
# CPU interpreter (tests) has no fast math and takes ``tl.log``. ``bench/sampler_bench.py`` measures both.
FAST_LOG = os.environ.get("TRITON_INTERPRET") != "1"


def _mix(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding 32-bit values (products wrap; the low 32 bits are kept)."""
    x = x ^ (x >> 16)
    x = (x * MIX1) & MASK32
    x = x ^ (x >> 15)
    x = (x * MIX2) & MASK32
    return x ^ (x >> 16)


def uniforms(seed: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """u [rows, cols] in (0, 1): 23 bits of hash(hash(seed) + row * cols + col), plus half a step."""
    key = _mix(seed.long() & MASK32)
    counter = torch.arange(rows * cols, device=seed.device, dtype=torch.long).view(rows, cols)
    return unit_interval(_mix((counter + key) & MASK32) >> (32 - UNIFORM_BITS))


def unit_interval(bits: torch.Tensor) -> torch.Tensor:
    """(bits + 1/2) / 2^23 in float32 for integers 0 <= bits < 2^23: exact, so inside (0, 1)."""
    return (bits.float() + 0.5) * (1.0 / (1 << UNIFORM_BITS))


def gumbel_sample_torch(logits: torch.Tensor, inv_temp: float, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(draw [B] long, lse [B] float32) with torch ops; ``seed`` is a [1] integer tensor."""
    scaled = logits.float() * inv_temp
    noise = -torch.log(-torch.log(uniforms(seed, *scaled.shape)))
    return (scaled + noise).argmax(-1), torch.logsumexp(scaled, -1)


if triton is not None:
    @triton.jit
    def _mix_tl(x):
        """lowbias32 on uint32 (products wrap at 2^32: the bits of ``_mix``)."""
        x = x ^ (x >> 16)
        x = x * 0x7FEB352D
        x = x ^ (x >> 15)
        x = x * 0x846CA68B
        return x ^ (x >> 16)

    @triton.jit
    def _gumbel_noise(u, FAST: tl.constexpr):
        """-log(-log(u)) for u in (0, 1). ``FAST``: -log(u) = v + v^2/2 + ... + v^7/7 with v = 1 - u (exact,
        u is a multiple of 2^-24) for v < 1/16 (truncation error < 5e-10 relative), the hardware log elsewhere."""
        if FAST:
            v = 1.0 - u
            series = v * (1.0 + v * (0.5 + v * (1.0 / 3 + v * (0.25 + v * (0.2 + v * (1.0 / 6 + v / 7.0))))))
            neg_log_u = tl.where(v < 0.0625, series, -libdevice.fast_logf(u))
            return -libdevice.fast_logf(neg_log_u)
        return -tl.log(-tl.log(u))

    @triton.jit
    def _gumbel_partial_kernel(logits_ptr, stride, seed_ptr, part_ptr, part_col_ptr, inv_temp, chunks,
                               cols: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
                               BITS: tl.constexpr, FAST: tl.constexpr):
        """One (row, chunk of CHUNK columns): the chunk's max and sum of exp(x - max) of x = logits / T,
        and its best Gumbel score with that score's (first) column. On 256 x 151936 bf16 logits (H200) the
        former kernel, one program per row hashing in 64-bit integers, took 185 us; hashing in uint32 with a
        program per chunk took 140 us, and taking the chunk's max per block rather than per lane (one
        exponential per logit instead of two) in chunks of 4096, 130 us (H200, 2026-11-26;
        bench/results/gpu-experiments.md)."""
        row = tl.program_id(0)
        chunk = tl.program_id(1)
        key = _mix_tl((tl.load(seed_ptr) & 0xFFFFFFFF).to(tl.uint32))
        base = row.to(tl.uint32) * cols + key
        lanes = tl.arange(0, BLOCK)
        chunk_max = tl.full([], float("-inf"), tl.float32)
        chunk_sum = tl.zeros([], tl.float32)
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        best_col = tl.zeros([BLOCK], tl.int32)
        for start in range(chunk * CHUNK, chunk * CHUNK + CHUNK, BLOCK):
            col = start + lanes
            valid = col < cols
            x = tl.load(logits_ptr + row.to(tl.int64) * stride + col, mask=valid,
                        other=float("-inf")).to(tl.float32) * inv_temp
            new_max = tl.maximum(chunk_max, tl.max(x, 0))
            shift = tl.where(new_max == float("-inf"), 0.0, new_max)  # no NaN from -inf - -inf
            chunk_sum = chunk_sum * tl.exp(chunk_max - shift) + tl.sum(tl.exp(x - shift), 0)
            chunk_max = new_max
            bits = _mix_tl(base + col.to(tl.uint32)) >> (32 - BITS)
            u = (bits.to(tl.float32) + 0.5) * (1.0 / (1 << BITS))  # unit_interval
            score = tl.where(valid, x + _gumbel_noise(u, FAST), float("-inf"))
            better = score > best
            best_col = tl.where(better, col, best_col)
            best = tl.where(better, score, best)
        top = tl.max(best, 0)
        at = (row * chunks + chunk).to(tl.int64)
        tl.store(part_ptr + at * 3, chunk_max)
        tl.store(part_ptr + at * 3 + 1, chunk_sum)
        tl.store(part_ptr + at * 3 + 2, top)
        tl.store(part_col_ptr + at, tl.min(tl.where(best == top, best_col, cols), 0))

    @triton.jit
    def _gumbel_combine_kernel(part_ptr, part_col_ptr, draw_ptr, lse_ptr, chunks, cols: tl.constexpr,
                               C_PAD: tl.constexpr):
        """One row: logsumexp over its chunks' (max, sum) and the best chunk's column (the first on ties)."""
        row = tl.program_id(0)
        c = tl.arange(0, C_PAD)
        ok = c < chunks
        at = row.to(tl.int64) * chunks + c
        chunk_max = tl.load(part_ptr + at * 3, mask=ok, other=float("-inf"))
        chunk_sum = tl.load(part_ptr + at * 3 + 1, mask=ok, other=0.0)
        score = tl.load(part_ptr + at * 3 + 2, mask=ok, other=float("-inf"))
        col = tl.load(part_col_ptr + at, mask=ok, other=cols)
        row_max = tl.max(chunk_max, 0)
        shift = tl.where(row_max == float("-inf"), 0.0, row_max)
        total = tl.sum(chunk_sum * tl.exp(chunk_max - shift), 0)
        top = tl.max(score, 0)
        tl.store(draw_ptr + row, tl.min(tl.where(score == top, col, cols), 0).to(tl.int64))
        tl.store(lse_ptr + row, row_max + tl.log(total))


GUMBEL_CHUNK = 4096  # columns per program: 38 x 256 programs for Qwen2's 151936-token vocabulary


def gumbel_sample_triton(logits: torch.Tensor, inv_temp: float, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``gumbel_sample_torch``'s function as two Triton kernels: per (row, chunk of columns) partials, then
    one combine per row (a fixed order: the same draws every run)."""
    rows, cols = logits.shape
    chunks = -(-cols // GUMBEL_CHUNK)
    part = torch.empty((rows, chunks, 3), dtype=torch.float32, device=logits.device)
    part_col = torch.empty((rows, chunks), dtype=torch.int32, device=logits.device)
    draw = torch.empty(rows, dtype=torch.long, device=logits.device)
    lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
    _gumbel_partial_kernel[(rows, chunks)](logits, logits.stride(0), seed, part, part_col, inv_temp, chunks,
                                           cols=cols, CHUNK=GUMBEL_CHUNK, BLOCK=1024, BITS=UNIFORM_BITS,
                                           FAST=FAST_LOG, num_warps=4)
    _gumbel_combine_kernel[(rows,)](part, part_col, draw, lse, chunks, cols=cols,
                                    C_PAD=max(2, triton.next_power_of_2(chunks)))
    return draw, lse


def gumbel_sample(logits: torch.Tensor, inv_temp: float, seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(draw [B] long, lse [B] float32) for ``logits`` [B, V]; Triton kernels on CUDA, torch ops elsewhere."""
    if triton is None or not logits.is_cuda:
        return gumbel_sample_torch(logits, inv_temp, seed)
    return gumbel_sample_triton(logits, inv_temp, seed)
