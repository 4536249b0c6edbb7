"""The transformer layer of one decode step in four Triton kernels, chained by programmatic dependent launch.

What: ``norm_qkv`` (input RMSNorm -> q/k/v projection -> bias -> Qwen3's q/k norms -> rotary embedding ->
q out, k and v into the cache slot), ``decode_attention`` (``rlscale.engines.decode_attention``),
``linear_residual`` (output projection added to the residual stream, in place) and ``norm_swiglu``
(post-attention RMSNorm -> gate/up projection -> SiLU(gate) * up), then ``linear_residual`` again for the
down projection. Each kernel rounds where the unfused step (``rlscale.engines.static_decoder``'s compiled
functions around cuBLAS) rounds: the GEMM output to bf16, then one rounding per fused element-wise group.

Why: at a decode step's 256 rows the step took ~10 kernels per layer, and every kernel paid a launch gap, a
ramp and a drain (``bench/results/decode_gemm-H100-session7.md``: no GEMM under 2.9 us whatever its bytes;
four element-wise kernels of ~2 us). ``bench/persistent_probe.py`` measured on an H200 that a dependent
launch whose kernel loads its weights before it waits for its predecessor did a 2.1 MB phase in 1.55 us
against 3.35 us for a plain launch. Here every kernel is launched that way: it prefetches its weight slice
into L2, lets the next kernel launch (``griddepcontrol.launch_dependents``), then waits for the previous
one (``griddepcontrol.wait``) before it reads activations. The norms, bias, rotary embedding, cache write,
SiLU gate and residual adds ride in the GEMMs' prologues and epilogues, so a layer is 5 kernels.

Layouts: ``gate_up`` rows interleave gate and up (row 2j = gate_j, row 2j + 1 = up_j) so that one output
tile holds both halves of its outputs; ``interleave_gate_up`` builds it. The cache is
``StaticKVCache.kv`` [batch, kv_heads, slots, 2 * head_dim] of one layer (keys then values per slot).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from rlscale.engines.decode_attention import gdc_launch_dependents, gdc_wait, tl, triton


@dataclass(frozen=True)
class Tiles:
    """GEMM tile: rows (bm) x output columns (bn) x reduction chunk (bk), warps and pipeline stages."""

    bm: int = 64
    bn: int = 64
    bk: int = 128
    warps: int = 4
    stages: int = 3


QKV_TILES = Tiles()  # bn is replaced by head_dim: one tile per head
SWIGLU_TILES = Tiles(bm=64, bn=128, bk=64, warps=4, stages=4)
RESIDUAL_TILES = Tiles(bm=64, bn=32, bk=128, warps=4, stages=4)


def interleave_gate_up(gate: torch.Tensor, up: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """[2I, K] with row 2j = gate[j], row 2j + 1 = up[j] (into ``out`` in place when given)."""
    out = torch.empty((2 * gate.shape[0], gate.shape[1]), dtype=gate.dtype, device=gate.device) if out is None else out
    pairs = out.view(gate.shape[0], 2, gate.shape[1])
    pairs[:, 0].copy_(gate)
    pairs[:, 1].copy_(up)
    return out


def _launch_options(tiles: Tiles, pdl: bool) -> dict:
    return dict(num_warps=tiles.warps, num_stages=tiles.stages, launch_pdl=pdl)


def norm_qkv(x: torch.Tensor, ln: torch.Tensor, qkv: torch.Tensor, bias: Optional[torch.Tensor],
             q_norm: Optional[torch.Tensor], k_norm: Optional[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor,
             pos: torch.Tensor, kv: torch.Tensor, slot: torch.Tensor, q_out: torch.Tensor, heads: int, kv_heads: int,
             eps: float, pdl: bool, tiles: Tiles = QKV_TILES, fold: bool = False) -> torch.Tensor:
    """``rotated_qkv`` of ``x`` [B, H] for one decode step: rotated q into ``q_out`` [B, heads * D]; rotated k
    and v into slot ``slot`` ([1] device tensor) of ``kv`` [B, kv_heads, slots, 2D]; ``cos``/``sin`` are the
    rotary tables [positions, D], ``pos`` [B] each row's position."""
    batch, hidden = x.shape
    head_dim = kv.shape[-1] // 2
    grid = (heads + 2 * kv_heads, triton.cdiv(batch, tiles.bm))
    _norm_qkv_kernel[grid](
        x, ln, qkv, bias if bias is not None else qkv, q_norm if q_norm is not None else ln,
        k_norm if k_norm is not None else ln, cos, sin, pos, kv, slot, q_out,
        batch, hidden, heads, kv_heads, eps, x.stride(0), qkv.stride(0), cos.stride(0), q_out.stride(0),
        kv.stride(0), kv.stride(1), kv.stride(2),
        HAS_BIAS=bias is not None, QK_NORM=q_norm is not None, HEAD_DIM=head_dim, HALF=head_dim // 2, BM=tiles.bm, BK=tiles.bk,
        LINES=triton.next_power_of_2(triton.cdiv(hidden, 64)), PDL=pdl, FOLD=fold, **_launch_options(tiles, pdl))
    return q_out


def norm_swiglu(x: torch.Tensor, ln: torch.Tensor, gate_up: torch.Tensor, out: torch.Tensor, eps: float, pdl: bool,
                tiles: Tiles = SWIGLU_TILES, fold: bool = False) -> torch.Tensor:
    """SiLU(gate) * up of RMSNorm(x) [B, H] through the interleaved ``gate_up`` [2I, H], into ``out`` [B, I]."""
    batch, hidden = x.shape
    grid = (triton.cdiv(gate_up.shape[0], tiles.bn), triton.cdiv(batch, tiles.bm))
    _norm_swiglu_kernel[grid](
        x, ln, gate_up, out, batch, gate_up.shape[0], hidden, eps, x.stride(0), gate_up.stride(0), out.stride(0),
        BM=tiles.bm, BN=tiles.bn, BK=tiles.bk, LINES=triton.next_power_of_2(triton.cdiv(hidden, 64)), PDL=pdl,
        FOLD=fold, **_launch_options(tiles, pdl))
    return out


def linear_residual(a: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], residual: torch.Tensor,
                    pdl: bool, tiles: Tiles = RESIDUAL_TILES) -> torch.Tensor:
    """``residual_add(residual, F.linear(a, weight, bias))`` written into ``residual`` [B, N] in place."""
    batch, k = a.shape
    n = weight.shape[0]
    grid = (triton.cdiv(n, tiles.bn), triton.cdiv(batch, tiles.bm))
    _linear_residual_kernel[grid](
        a, weight, bias if bias is not None else weight, residual, batch, n, k, a.stride(0), weight.stride(0),
        residual.stride(0), HAS_BIAS=bias is not None, BM=tiles.bm, BN=tiles.bn, BK=tiles.bk,
        LINES=triton.next_power_of_2(triton.cdiv(k, 64)), PDL=pdl, **_launch_options(tiles, pdl))
    return residual


if triton is not None:

    @triton.jit
    def _prefetch_then_wait(W, rows, n_rows, stride_w, K, LINES: tl.constexpr, PDL: tl.constexpr):
        """With PDL: pull this program's weight rows (the first K of each) into L2 while the previous kernel
        still runs, let the next kernel launch, then wait for the previous kernel's writes."""
        if PDL:
            line = tl.minimum(tl.arange(0, LINES) * 64, K - 1)  # one address per 128-byte line of bf16
            ptrs = W + tl.minimum(rows, n_rows - 1)[:, None] * stride_w + line[None, :]
            tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                                      is_pure=False, pack=1)
            gdc_launch_dependents()
            gdc_wait()

    @triton.jit
    def _rstd(X, rows, row_ok, stride_x, K, eps, BM: tl.constexpr, BK: tl.constexpr):
        """1 / sqrt(mean(x^2) + eps) per row, in fp32 (HF's RMSNorm statistics)."""
        ss = tl.zeros([BM], tl.float32)
        for k0 in range(0, K, BK):
            k = k0 + tl.arange(0, BK)
            x = tl.load(X + rows[:, None] * stride_x + k[None, :], mask=row_ok[:, None] & (k < K)[None, :],
                        other=0.0).to(tl.float32)
            ss += tl.sum(x * x, 1)
        return tl.rsqrt(ss / K + eps)

    @triton.jit
    def _norm_matmul(X, LN, W, rows, row_ok, cols, col_ok, stride_x, stride_w, K, eps,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FOLD: tl.constexpr):
        """fp32 [BM, BN] = RMSNorm(X[rows]) @ W[cols]^T. Unfolded: the normalised input rounded as HF rounds
        it ((x * rstd) to bf16, times the norm weight, to bf16), after a first pass for rstd. Folded: W holds
        W * diag(norm weight) and the rows are scaled by rstd after the one pass (no bf16 rounding of the
        normalised input)."""
        acc = tl.zeros([BM, BN], tl.float32)
        if FOLD:
            ss = tl.zeros([BM], tl.float32)
            for k0 in range(0, K, BK):
                k = k0 + tl.arange(0, BK)
                k_ok = k < K
                x = tl.load(X + rows[:, None] * stride_x + k[None, :], mask=row_ok[:, None] & k_ok[None, :],
                            other=0.0)
                w = tl.load(W + cols[None, :] * stride_w + k[:, None], mask=col_ok[None, :] & k_ok[:, None],
                            other=0.0)
                xf = x.to(tl.float32)
                ss += tl.sum(xf * xf, 1)
                acc = tl.dot(x, w, acc)
            acc = acc * tl.rsqrt(ss / K + eps)[:, None]
        else:
            rstd = _rstd(X, rows, row_ok, stride_x, K, eps, BM, BK)
            for k0 in range(0, K, BK):
                k = k0 + tl.arange(0, BK)
                k_ok = k < K
                x = tl.load(X + rows[:, None] * stride_x + k[None, :], mask=row_ok[:, None] & k_ok[None, :],
                            other=0.0)
                ln = tl.load(LN + k, mask=k_ok, other=0.0).to(tl.float32)
                a = (ln[None, :] * (x.to(tl.float32) * rstd[:, None]).to(x.dtype).to(tl.float32)).to(x.dtype)
                w = tl.load(W + cols[None, :] * stride_w + k[:, None], mask=col_ok[None, :] & k_ok[:, None],
                            other=0.0)
                acc = tl.dot(a, w, acc)
        return acc

    @triton.jit
    def _head_norm(y, weight_ptr, d, eps, HEAD_DIM: tl.constexpr):
        """Qwen3's per-head RMSNorm of the bf16 tile ``y`` [BM, HEAD_DIM] (one head per tile), as bf16."""
        yf = y.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(yf * yf, 1) / HEAD_DIM + eps)
        w = tl.load(weight_ptr + d).to(tl.float32)
        return (w[None, :] * (yf * rstd[:, None]).to(y.dtype).to(tl.float32)).to(y.dtype)

    @triton.jit
    def _norm_qkv_kernel(X, LN, W, Bias, QN, KN, Cos, Sin, Pos, KV, Slot, QOut,
                         M, K, heads, kv_heads, eps, stride_x, stride_w, stride_cos, stride_q,
                         stride_kvb, stride_kvh, stride_kvs,
                         HAS_BIAS: tl.constexpr, QK_NORM: tl.constexpr, HEAD_DIM: tl.constexpr,
                         HALF: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, LINES: tl.constexpr, PDL: tl.constexpr,
                         FOLD: tl.constexpr):
        """One (head of q, k or v; block of rows)."""
        head = tl.program_id(0)
        rows = tl.program_id(1) * BM + tl.arange(0, BM)
        row_ok = rows < M
        d = tl.arange(0, HEAD_DIM)
        cols = head * HEAD_DIM + d
        n_rows = (heads + 2 * kv_heads) * HEAD_DIM
        _prefetch_then_wait(W, cols, n_rows, stride_w, K, LINES, PDL)
        acc = _norm_matmul(X, LN, W, rows, row_ok, cols, cols < n_rows, stride_x, stride_w, K, eps, BM, HEAD_DIM, BK,
                           FOLD)
        if HAS_BIAS:
            acc += tl.load(Bias + cols).to(tl.float32)[None, :]
        y = acc.to(QOut.dtype.element_ty)  # F.linear's output
        slot = tl.load(Slot).to(tl.int64)
        kv_base = KV + rows.to(tl.int64)[:, None] * stride_kvb + slot * stride_kvs
        if head >= heads + kv_heads:  # a value head: straight into the cache's value half
            h = head - heads - kv_heads
            tl.store(kv_base + h * stride_kvh + HEAD_DIM + d[None, :], y, mask=row_ok[:, None])
        else:
            if QK_NORM:
                y = _head_norm(y, tl.where(head < heads, QN, KN), d, eps, HEAD_DIM)
            lo, hi = tl.split(tl.permute(tl.reshape(y.to(tl.float32), [BM, 2, HALF]), [0, 2, 1]))
            pos = tl.load(Pos + rows, mask=row_ok, other=0)
            j = tl.arange(0, HALF)
            table = pos[:, None] * stride_cos + j[None, :]
            cos_lo = tl.load(Cos + table, mask=row_ok[:, None], other=0.0).to(tl.float32)
            cos_hi = tl.load(Cos + table + HALF, mask=row_ok[:, None], other=0.0).to(tl.float32)
            sin_lo = tl.load(Sin + table, mask=row_ok[:, None], other=0.0).to(tl.float32)
            sin_hi = tl.load(Sin + table + HALF, mask=row_ok[:, None], other=0.0).to(tl.float32)
            out_lo = (lo * cos_lo - hi * sin_lo).to(QOut.dtype.element_ty)
            out_hi = (hi * cos_hi + lo * sin_hi).to(QOut.dtype.element_ty)
            if head < heads:
                q_base = QOut + rows[:, None] * stride_q + head * HEAD_DIM + j[None, :]
                tl.store(q_base, out_lo, mask=row_ok[:, None])
                tl.store(q_base + HALF, out_hi, mask=row_ok[:, None])
            else:
                k_base = kv_base + (head - heads) * stride_kvh + j[None, :]
                tl.store(k_base, out_lo, mask=row_ok[:, None])
                tl.store(k_base + HALF, out_hi, mask=row_ok[:, None])

    @triton.jit
    def _norm_swiglu_kernel(X, LN, W, Out, M, N, K, eps, stride_x, stride_w, stride_out,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, LINES: tl.constexpr,
                            PDL: tl.constexpr, FOLD: tl.constexpr):
        """One (block of BN interleaved gate/up rows = BN / 2 outputs; block of rows)."""
        rows = tl.program_id(1) * BM + tl.arange(0, BM)
        row_ok = rows < M
        cols = tl.program_id(0) * BN + tl.arange(0, BN)
        col_ok = cols < N
        _prefetch_then_wait(W, cols, N, stride_w, K, LINES, PDL)
        acc = _norm_matmul(X, LN, W, rows, row_ok, cols, col_ok, stride_x, stride_w, K, eps, BM, BN, BK, FOLD)
        y = acc.to(Out.dtype.element_ty).to(tl.float32)  # F.linear's output
        gate, up = tl.split(tl.reshape(y, [BM, BN // 2, 2]))
        out = gate / (1.0 + tl.exp(-gate)) * up
        j = tl.program_id(0) * (BN // 2) + tl.arange(0, BN // 2)
        tl.store(Out + rows[:, None] * stride_out + j[None, :], out.to(Out.dtype.element_ty),
                 mask=row_ok[:, None] & (j < N // 2)[None, :])

    @triton.jit
    def _linear_residual_kernel(A, W, Bias, R, M, N, K, stride_a, stride_w, stride_r,
                                HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                LINES: tl.constexpr, PDL: tl.constexpr):
        """One (block of output columns; block of rows): R += A @ W^T (+ bias), rounded as ``residual_add``."""
        rows = tl.program_id(1) * BM + tl.arange(0, BM)
        row_ok = rows < M
        cols = tl.program_id(0) * BN + tl.arange(0, BN)
        col_ok = cols < N
        _prefetch_then_wait(W, cols, N, stride_w, K, LINES, PDL)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            k = k0 + tl.arange(0, BK)
            k_ok = k < K
            a = tl.load(A + rows[:, None] * stride_a + k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(W + cols[None, :] * stride_w + k[:, None], mask=col_ok[None, :] & k_ok[:, None], other=0.0)
            acc = tl.dot(a, w, acc)
        if HAS_BIAS:
            acc += tl.load(Bias + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        r_ptrs = R + rows[:, None] * stride_r + cols[None, :]
        ok = row_ok[:, None] & col_ok[None, :]
        r = tl.load(r_ptrs, mask=ok, other=0.0)
        out = r.to(tl.float32) + acc.to(r.dtype).to(tl.float32)
        tl.store(r_ptrs, out.to(r.dtype), mask=ok)
