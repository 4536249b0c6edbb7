"""Split-K partial products of a decode step's residual projections (attention output and MLP down), as a
Triton kernel.

What: ``splitk_partials(x, weight)`` for x [M, K] and weight [N, K] (``F.linear``'s layout) returns fp32
partials P [S, M, N] with sum_s P[s] = x @ weight^T: split s covers K columns [s * chunk, (s + 1) * chunk).
``residual_projection`` sums them in a fixed order (the same result every run) and rounds to x's dtype, as
``F.linear`` would.

Why: at a decode step's M = 256 rows these GEMMs have few output tiles (Qwen2-0.5B's down projection:
256 x 896 outputs, 28 tiles of 128 x 64) and a long K, so without splitting K they cannot fill the GPU;
cuBLAS splits K too, but reduces in a kernel of its own. Here the partials are a plain tensor, so
inductor fuses their sum into the kernel that already adds the residual and takes the next RMSNorm: one
launch per projection instead of two, and none of the projection's bf16 output round trip.

Design: one program per (M tile, N tile, split) accumulates ``tl.dot`` over its K chunk in fp32 and stores
its tile; the split count is a pure function of the shapes (``plan``): about one program per SM, each
chunk at least two K blocks long.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlscale.engines.decode_attention import _cdiv, _sm_count

try:
    import triton
    import triton.language as tl
    from torch.library import triton_op, wrap_triton
except ImportError:  # CPU-only installs: F.linear only
    triton = None


@dataclass(frozen=True)
class SplitPlan:
    """Tile sizes, the K columns per split and the number of splits."""

    block_m: int
    block_n: int
    block_k: int
    chunk: int
    splits: int


def plan(m: int, n: int, k: int, device: torch.device) -> SplitPlan:
    """Splits of K until the programs (M tiles x N tiles x splits) about fill the SMs, every chunk a whole
    number of K blocks, at least two."""
    block_m, block_n, block_k = (128 if m > 64 else 64), 64, 64
    tiles = _cdiv(m, block_m) * _cdiv(n, block_n)
    wanted = max(1, min(_sm_count(device) // tiles, _cdiv(k, 2 * block_k)))
    chunk = _cdiv(_cdiv(k, wanted), block_k) * block_k
    return SplitPlan(block_m, block_n, block_k, chunk, _cdiv(k, chunk))


if triton is not None:
    @triton.jit
    def _splitk_kernel(X, W, P, m, n, k, chunk, stride_xm, stride_wn, stride_ps, stride_pm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """One (M tile, N tile, split): P[split, tile] = X[tile rows, chunk] @ W[tile cols, chunk]^T in fp32."""
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        split = tl.program_id(2)
        start = split * chunk
        end = tl.minimum(start + chunk, k)
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k0 in range(start, end, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < end
            x = tl.load(X + rows[:, None].to(tl.int64) * stride_xm + ks[None, :],
                        mask=(rows < m)[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(W + cols[:, None].to(tl.int64) * stride_wn + ks[None, :],
                        mask=(cols < n)[:, None] & k_ok[None, :], other=0.0)
            acc += tl.dot(x, tl.trans(w))
        tl.store(P + split * stride_ps + rows[:, None].to(tl.int64) * stride_pm + cols[None, :], acc,
                 mask=(rows < m)[:, None] & (cols < n)[None, :])

    @triton_op("rlscale::splitk_partials", mutates_args=())
    def splitk_partials(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """fp32 partials [S, M, N] of x [M, K] @ weight[N, K]^T over S chunks of K (``plan``)."""
        m, k = x.shape
        n = weight.shape[0]
        cfg = plan(m, n, k, x.device)
        out = torch.empty((cfg.splits, m, n), dtype=torch.float32, device=x.device)
        grid = (_cdiv(m, cfg.block_m), _cdiv(n, cfg.block_n), cfg.splits)
        wrap_triton(_splitk_kernel)[grid](x, weight, out, m, n, k, cfg.chunk, x.stride(0), weight.stride(0),
                                          out.stride(0), out.stride(1), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                                          BLOCK_K=cfg.block_k, num_warps=4, num_stages=4)
        return out


def residual_projection(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, split_k: bool) -> torch.Tensor:
    """``F.linear(h, weight, bias)`` in h's dtype for h [M, K]; with ``split_k``, from ``splitk_partials``
    summed in split order (unrolled, so a compiled caller fuses the sum into its next kernel)."""
    if not split_k:
        return torch.nn.functional.linear(h, weight, bias)
    h = h if h.stride(-1) == 1 else h.contiguous()
    parts = splitk_partials(h, weight).unbind(0)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    if bias is not None:
        total = total + bias.float()
    return total.to(h.dtype)
