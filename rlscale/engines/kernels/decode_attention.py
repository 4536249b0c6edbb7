"""Grouped-query attention of one decode step over the static KV cache, as a Triton kernel.

What: ``decode_attention(q, keys, values, mask, kv_len)``: every row's ``G`` query heads of one KV head
attend to the first ``kv_len`` slots of that head's cache, slots whose ``mask`` is False excluded (left
padding of the prompt). ``decode_attention_reference`` is the same computation with
``F.scaled_dot_product_attention`` and an additive 0 / -inf mask: the fallback without CUDA or Triton,
and the oracle of the tests.

Why: one decode step of ``StaticKVDecoder`` must read little more than the weights and the live KV
cache. With SDPA (cuDNN backend) attention reached only ~1.6 TB/s on an H200 for the generator's shapes
(256 rows, SmolLM2-135M: 3 KV heads x 3 groups, Qwen2-0.5B: 2 x 7, head_dim 64, kv_len 192..704) and
took 52% of the decode step; it is a pure streaming read of K and V, so it should run near HBM bandwidth.

Design:

- one program per (row, KV head[, split]) reads each K/V block once for all ``G`` query heads of that KV
  head; the ``G`` heads are the M dimension of two ``tl.dot`` (scores = q k^T, then p v), padded to 16
  rows (the minimum MMA tile). The padding costs idle tensor-core lanes, not bytes: the kernel is bound by
  the K/V stream, and ``tl.dot`` keeps the [G, BLOCK_N, D] product out of registers, which a broadcast
  multiply-reduce would materialise (16K fp32 values per block at G=4, BLOCK_N=64, D=64);
- online softmax in fp32 (base-2 exponentials, the scale folded into log2 e); scores of masked slots are
  -inf and a running max of -inf (a block or a split with no live slot) is treated as 0, so no NaN arises;
- split-KV (flash-decoding) when rows x KV heads alone cannot fill the GPU: each split writes its
  unnormalised output, running max and denominator in fp32 and a small kernel combines them;
- no autotuning: the configuration is a pure function of the shapes (``plan``), so the kernel can be
  compiled in the warm-up run and captured in a CUDA graph (``kv_len`` is fixed per captured graph);
- ``lengths``: rows of different lengths under one ``kv_len`` (the refilling generator's rows,
  ``graph_decode.RefillBucket``, attend to the longest row's bucket): row b's loop ends at ``lengths[b]``, a
  device tensor read by the kernel (so a captured graph follows the rows as they grow), and its K/V loads
  below that are predicated on the mask as well, so a dead slot (left padding) costs its mask byte, not its
  4 D bytes of K and V. A step then reads each row's own cache and visits none of the blocks past it: with
  every loop over the longest row's kv_len the attention of 48 rows of own lengths ran at 66 % of the HBM
  bound on an H200, against 92 % for rows of equal length. The result is that of the full loop (a skipped
  slot's weight is 0 either way: the running max and sums are unchanged by a block with no live slot); every
  live slot of row b must be below ``lengths[b]``. Without it (every row the same length) neither is done.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference path only
    triton = None

LOG2E = 1.4426950408889634
MIN_DOT = 16  # smallest M / N / K of tl.dot


@dataclass(frozen=True)
class Plan:
    """Launch configuration: KV slots per block, KV splits per (row, head), warps and pipeline stages."""

    block_n: int = 64
    splits: int = 1
    num_warps: int = 4
    num_stages: int = 2


def available(device: torch.device | str) -> bool:
    """True where the Triton kernel runs: a CUDA device and Triton importable."""
    return triton is not None and torch.device(device).type == "cuda" and torch.cuda.is_available()


@lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1


def plan(programs: int, kv_len: int, device: torch.device) -> Plan:
    """The default configuration for ``programs`` = rows x KV heads: KV splits until about four programs
    run per SM, each split at least two blocks long."""
    wanted = 4 * _sm_count(device) // programs
    return Plan(splits=max(1, min(wanted, _cdiv(kv_len, 2 * Plan.block_n), 16)))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def decode_attention_reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                               kv_len: int, scale: Optional[float] = None,
                               lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``decode_attention`` by SDPA: the G query heads of a KV head are that head's query "sequence", so the
    cache is not repeated; the mask becomes an additive [B, 1, 1, kv_len] bias (``lengths`` changes what the
    kernel reads, not the result: ignored)."""
    bias = torch.zeros((q.shape[0], 1, 1, kv_len), dtype=q.dtype, device=q.device)
    bias.masked_fill_(~mask[:, None, None, :kv_len], float("-inf"))
    return F.scaled_dot_product_attention(q, keys[:, :, :kv_len], values[:, :, :kv_len], attn_mask=bias, scale=scale)


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, kv_len: int,
                     scale: Optional[float] = None, config: Optional[Plan] = None,
                     lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Attention of q [B, KVH, G, D] to slots 0..kv_len-1 of keys / values [B, KVH, S, D] (last dim
    contiguous) where mask [B, S] (bool) is True; every row needs a live slot below kv_len. Returns
    [B, KVH, G, D] in q's dtype. ``config`` overrides ``plan`` (benchmarks, tests); ``lengths`` [B] (int, on q's
    device): row b reads slots below ``lengths[b]`` only, and of them its live ones (module docstring)."""
    batch, kv_heads, groups, head_dim = q.shape
    assert keys.stride(-1) == 1 and values.stride(-1) == 1 and keys.shape[-2] >= kv_len
    q = q if q.stride(-1) == 1 else q.contiguous()
    mask = mask.contiguous().view(torch.uint8)
    programs = batch * kv_heads
    cfg = config or plan(programs, kv_len, q.device)
    chunk = _cdiv(_cdiv(kv_len, cfg.splits), cfg.block_n) * cfg.block_n  # slots per split, whole blocks
    splits = _cdiv(kv_len, chunk)  # no empty split
    out = torch.empty((batch, kv_heads, groups, head_dim), dtype=q.dtype, device=q.device)
    if splits > 1:
        part_acc = torch.empty((programs, groups, splits, head_dim), dtype=torch.float32, device=q.device)
        part_m = torch.empty((programs, groups, splits), dtype=torch.float32, device=q.device)
        part_l = torch.empty_like(part_m)
    else:
        part_acc = part_m = part_l = out  # unused
    own = lengths is not None
    row_lengths = lengths if own else mask  # unused without lengths
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    d_pad = max(MIN_DOT, triton.next_power_of_2(head_dim))
    _decode_kernel[(programs, splits)](
        q, keys, values, mask, row_lengths, out, part_acc, part_m, part_l,
        kv_heads, kv_len, chunk, splits, scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2), keys.stride(0), keys.stride(1), keys.stride(2),
        values.stride(0), values.stride(1), values.stride(2), mask.stride(0),
        GROUPS=groups, HEAD_DIM=head_dim, G_PAD=max(MIN_DOT, triton.next_power_of_2(groups)), D_PAD=d_pad,
        BLOCK_N=cfg.block_n, SPLIT=splits > 1, DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        OWN_LENGTHS=own, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    if splits > 1:
        _combine_kernel[(programs * groups,)](part_acc, part_m, part_l, out, splits, HEAD_DIM=head_dim, D_PAD=d_pad,
                                              S_PAD=triton.next_power_of_2(splits))
    return out


def _fix_interpreter_bf16() -> None:
    """Two bf16 faults of Triton's CPU interpreter (``TRITON_INTERPRET=1``, tests and ``--smoke`` runs only),
    which stores bf16 as uint16: ``tl.dot`` multiplies those raw bits (widen such operands to fp32 first,
    exact), and a float32 -> bf16 cast truncates where the GPU rounds to nearest even (cast through torch)."""
    import numpy as np
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    dot, cast = InterpreterBuilder.create_dot, InterpreterBuilder.cast_impl

    def widen(x: TensorHandle) -> TensorHandle:
        if x.dtype.scalar != tl.bfloat16 or x.data.dtype != np.uint16:
            return x
        return TensorHandle((x.data.astype(np.uint32) << 16).view(np.float32), tl.float32)

    def round_to_bf16(self, src: TensorHandle, dst_type) -> TensorHandle:
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return cast(self, src, dst_type)
        rounded = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32)).to(torch.bfloat16)
        return TensorHandle(rounded.view(torch.int16).numpy().view(np.uint16), tl.bfloat16)

    InterpreterBuilder.create_dot = lambda self, a, b, d, *args: dot(self, widen(a), widen(b), d, *args)
    InterpreterBuilder.cast_impl = round_to_bf16


if triton is not None:
    if os.environ.get("TRITON_INTERPRET") == "1":
        _fix_interpreter_bf16()

    @triton.jit
    def _decode_kernel(Q, K, V, Mask, Lengths, Out, PartAcc, PartM, PartL,
                       kv_heads, kv_len, chunk, splits, qk_scale,
                       stride_qb, stride_qh, stride_qg, stride_kb, stride_kh, stride_kn,
                       stride_vb, stride_vh, stride_vn, stride_mb,
                       GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr, G_PAD: tl.constexpr, D_PAD: tl.constexpr,
                       BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr,
                       OWN_LENGTHS: tl.constexpr):
        """One (row, KV head, split): online softmax over its slots [split * chunk, +chunk) ∩ [0, kv_len), with
        ``OWN_LENGTHS`` ∩ [0, Lengths[row])."""
        bh = tl.program_id(0).to(tl.int64)
        split = tl.program_id(1)
        b = bh // kv_heads
        h = bh % kv_heads
        g = tl.arange(0, G_PAD)
        d = tl.arange(0, D_PAD)
        g_ok = g < GROUPS
        d_ok = d < HEAD_DIM
        q = tl.load(Q + b * stride_qb + h * stride_qh + g[:, None] * stride_qg + d[None, :],
                    mask=g_ok[:, None] & d_ok[None, :], other=0.0)
        k_base = K + b * stride_kb + h * stride_kh
        v_base = V + b * stride_vb + h * stride_vh
        start = split * chunk
        end = tl.minimum(start + chunk, kv_len)
        if OWN_LENGTHS:
            end = tl.minimum(end, tl.load(Lengths + b).to(tl.int32))
        m_i = tl.full([G_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([G_PAD], tl.float32)
        acc = tl.zeros([G_PAD, D_PAD], tl.float32)
        for n0 in range(start, end, BLOCK_N):
            n = n0 + tl.arange(0, BLOCK_N)
            in_range = n < end
            live = tl.load(Mask + b * stride_mb + n, mask=in_range, other=0) != 0
            kv_mask = (in_range & live if OWN_LENGTHS else in_range)[:, None] & d_ok[None, :]
            k = tl.load(k_base + n[:, None] * stride_kn + d[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_base + n[:, None] * stride_vn + d[None, :], mask=kv_mask, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
            s = tl.where(live[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
            m_i = m_new
        if SPLIT:
            row = (bh * GROUPS + g) * splits + split
            tl.store(PartAcc + row[:, None] * HEAD_DIM + d[None, :], acc, mask=g_ok[:, None] & d_ok[None, :])
            tl.store(PartM + row, m_i, mask=g_ok)
            tl.store(PartL + row, l_i, mask=g_ok)
        else:
            out = acc / l_i[:, None]
            tl.store(Out + (bh * GROUPS + g[:, None]) * HEAD_DIM + d[None, :], out.to(Out.dtype.element_ty),
                     mask=g_ok[:, None] & d_ok[None, :])

    @triton.jit
    def _combine_kernel(PartAcc, PartM, PartL, Out, splits,
                        HEAD_DIM: tl.constexpr, D_PAD: tl.constexpr, S_PAD: tl.constexpr):
        """One (row, KV head, query head): the splits' partial outputs weighted by exp2(m_split - m_max)."""
        r = tl.program_id(0).to(tl.int64)
        s = tl.arange(0, S_PAD)
        d = tl.arange(0, D_PAD)
        s_ok = s < splits
        d_ok = d < HEAD_DIM
        m = tl.load(PartM + r * splits + s, mask=s_ok, other=float("-inf"))
        l = tl.load(PartL + r * splits + s, mask=s_ok, other=0.0)
        acc = tl.load(PartAcc + (r * splits + s[:, None]) * HEAD_DIM + d[None, :],
                      mask=s_ok[:, None] & d_ok[None, :], other=0.0)
        w = tl.exp2(m - tl.max(m, 0))
        out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
        tl.store(Out + r * HEAD_DIM + d, out.to(Out.dtype.element_ty), mask=d_ok)
