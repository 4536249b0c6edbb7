"""The decode step's GEMMs at 256 rows: cuBLAS as the decoder calls it against the alternatives, one GPU.

Why: in the graph-replay profiles of a decode step (``bench/results/profile_graph-*-H100.md``) the four per-layer
GEMMs take 3-5x the time their weight bytes need at HBM bandwidth (Qwen2-0.5B's down projection: 10.2 us on
an H100 for 8.7 MB). This bench asks whether any other kernel does these shapes faster:

- ``cublas``: ``F.linear``, the decoder's call (cuBLAS picks the kernel by its heuristics);
- ``cublaslt``: the same under ``torch.backends.cuda.preferred_blas_library("cublaslt")``;
- ``swapped``: ``W @ x^T``, the transposed problem (another heuristic choice), output [N, rows];
- ``triton``: a split-K Triton GEMM swept over tiles, splits, warps and stages; with splits > 1 it writes
  fp32 partials, whose sum the decoder would fuse into the consumer's element-wise kernel, so the time
  excludes that sum. The best configuration is reported, after a check against cuBLAS.

Every time is a CUDA-graph replay of one call per layer, each layer with its own weight (as in the decoder,
so the weights do not sit in L2 between calls); the head is timed over two copies.

    python bench/decode_gemm_bench.py [--models smollm2-135m,qwen2-0.5b] [--json PATH]
    python bench/decode_gemm_bench.py --smoke    # CPU, Triton interpreter: the tiny shape, 8 rows, errors only

``--smoke`` checks the split-K Triton kernel (through Triton's interpreter, over ``SMOKE_SWEEP``: one tile, 1 and
2 splits) against ``F.linear`` on the GEMMs of ``bench/lib/shapes.py``'s tiny shape, and prints each GEMM's largest
relative error in place of the times, in float16 (the interpreter's ``tl.dot`` returns garbage for bfloat16
operands); cuBLAS, cuBLASLt and CUDA graphs are GPU-only, so it times nothing.
"""
from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from lib.smoke import SMOKE  # noqa: I001 (before triton: the interpreter)
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from lib.shapes import PEAKS, SHAPES
from lib.timers import time_graph

ROWS = 8 if SMOKE else 256
HEAD_DIM = 64
TOLERANCE = 2e-2  # max |triton - cublas| / max |cublas|
SWEEP = [dict(BM=bm, BN=bn, BK=bk, splits=s, num_warps=w, num_stages=st)
         for bm, bn, bk, s, (w, st) in itertools.product((64, 128), (32, 64, 128), (64, 128), (1, 2, 4, 8),
                                                         ((4, 3), (4, 4), (8, 3)))]
SMOKE_SWEEP = [dict(BM=16, BN=32, BK=32, splits=s, num_warps=4, num_stages=3) for s in (1, 2)]


@dataclass(frozen=True)
class Gemm:
    name: str
    n: int
    k: int
    bias: bool
    copies: int  # distinct weights in one replay


def decode_gemms(shape_name: str) -> List[Gemm]:
    s = SHAPES[shape_name]
    qkv = (s.heads + 2 * s.kv_heads) * HEAD_DIM
    bias = s.family == "qwen2"
    return [Gemm("qkv", qkv, s.hidden, bias, s.layers), Gemm("o", s.hidden, s.heads * HEAD_DIM, False, s.layers),
            Gemm("gate_up", 2 * s.intermediate, s.hidden, False, s.layers),
            Gemm("down", s.hidden, s.intermediate, False, s.layers), Gemm("head", s.vocab, s.hidden, False, 2)]


@triton.jit
def _splitk_gemm(X, W, Out, M, N, K, k_chunk, stride_xm, stride_wn, stride_os, stride_om,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr):
    """Out[split, m, n] = sum over k in the split's chunk of X[m, k] W[n, k] (fp32 partials when SPLIT)."""
    pid_n, pid_m, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    start = split * k_chunk
    end = tl.minimum(start + k_chunk, K)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(start, end, BK):
        rk = k0 + tl.arange(0, BK)
        k_ok = rk < end
        a = tl.load(X + rm[:, None] * stride_xm + rk[None, :], mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(W + rn[None, :] * stride_wn + rk[:, None], mask=(rn[None, :] < N) & k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    out = Out + split * stride_os + rm[:, None] * stride_om + rn[None, :]
    ok = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(out, acc if SPLIT else acc.to(Out.dtype.element_ty), mask=ok)


def triton_call(x: torch.Tensor, weights: List[torch.Tensor], cfg: dict) -> Callable[[int], torch.Tensor]:
    m, k = x.shape
    n = weights[0].shape[0]
    splits = cfg["splits"]
    chunk = triton.cdiv(triton.cdiv(k, splits), cfg["BK"]) * cfg["BK"]
    splits = triton.cdiv(k, chunk)
    out = torch.empty((splits, m, n), device=x.device, dtype=torch.float32 if splits > 1 else x.dtype)
    grid = (triton.cdiv(n, cfg["BN"]), triton.cdiv(m, cfg["BM"]), splits)

    def call(i: int) -> torch.Tensor:
        _splitk_gemm[grid](x, weights[i], out, m, n, k, chunk, x.stride(0), weights[i].stride(0), out.stride(0),
                           out.stride(1), BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], SPLIT=splits > 1,
                           num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        return out
    return call


def check(call: Callable[[int], torch.Tensor], expected: torch.Tensor) -> float:
    got = call(0).float().sum(0)  # [splits, rows, N]
    return float((got - expected).abs().max() / expected.abs().max())


def best_triton(x: torch.Tensor, weights: List[torch.Tensor], expected: torch.Tensor) -> tuple[float, Optional[dict]]:
    best = (float("inf"), None)
    for cfg in SWEEP:
        try:
            call = triton_call(x, weights, cfg)
            if check(call, expected) > TOLERANCE:
                print(f"  rejected {cfg}: error", flush=True)
                continue
            us = time_graph(call, len(weights))
        except triton.runtime.errors.OutOfResources:
            continue
        best = min(best, (us, cfg), key=lambda r: r[0])
    return best


def smoke(gemm: Gemm) -> dict:
    """The Triton kernel's largest error against ``F.linear`` over ``SMOKE_SWEEP``, on the CPU."""
    gen = torch.Generator().manual_seed(gemm.n * 31 + gemm.k)
    x = torch.randn((ROWS, gemm.k), generator=gen).half()
    weights = [(torch.randn((gemm.n, gemm.k), generator=gen) / gemm.k ** 0.5).half()]
    expected = F.linear(x.float(), weights[0].float())
    err = max(check(triton_call(x, weights, cfg), expected) for cfg in SMOKE_SWEEP)
    return {"gemm": gemm.name, "n": gemm.n, "k": gemm.k, "weight_mb": gemm.n * gemm.k * 2 / 1e6, "max_err": err}


def measure(gemm: Gemm, bw: float, flops: float) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(gemm.n * 31 + gemm.k)
    x = torch.randn((ROWS, gemm.k), generator=gen, device="cuda").bfloat16()
    weights = [(torch.randn((gemm.n, gemm.k), generator=gen, device="cuda") / gemm.k ** 0.5).bfloat16()
               for _ in range(gemm.copies)]
    bias = torch.randn(gemm.n, generator=gen, device="cuda").bfloat16() if gemm.bias else None
    expected = F.linear(x, weights[0]).float()
    rec = {"gemm": gemm.name, "n": gemm.n, "k": gemm.k, "weight_mb": gemm.n * gemm.k * 2 / 1e6}
    rec["cublas_us"] = time_graph(lambda i: F.linear(x, weights[i], bias), gemm.copies)
    previous = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library("cublaslt")
    try:
        rec["cublaslt_us"] = time_graph(lambda i: F.linear(x, weights[i], bias), gemm.copies)
    finally:
        torch.backends.cuda.preferred_blas_library(previous)
    rec["swapped_us"] = time_graph(lambda i: torch.mm(weights[i], x.t()), gemm.copies)
    rec["triton_us"], rec["triton_config"] = best_triton(x, weights, expected)
    bytes_moved = (gemm.n * gemm.k + ROWS * gemm.k + ROWS * gemm.n) * 2
    rec["hbm_bound_us"] = bytes_moved / bw * 1e6
    rec["flop_bound_us"] = 2 * ROWS * gemm.n * gemm.k / flops * 1e6
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2-0.5b")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, the tiny shape, errors only")
    args = ap.parse_args()
    if SMOKE:
        main_smoke(args.json)
        return
    card = "H200" if "H200" in torch.cuda.get_device_name() else "H100"
    flops, bw = PEAKS[card]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"{ROWS} rows, bf16; bounds at datasheet {bw / 1e12:.2f} TB/s, {flops / 1e12:.0f} TFLOP/s")
    print("| model | gemm | N | K | HBM bound us | FLOP bound us | cublas us | cublaslt us | swapped us | "
          "triton us | triton config | cublas / best other |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for model in args.models.split(","):
        for gemm in decode_gemms(model):
            r = {"model": model, **measure(gemm, bw, flops)}
            results.append(r)
            other = min(r["cublaslt_us"], r["swapped_us"], r["triton_us"])
            cfg = r["triton_config"] or {}
            print(f"| {model} | {r['gemm']} | {r['n']} | {r['k']} | {r['hbm_bound_us']:.1f} | {r['flop_bound_us']:.1f} | "
                  f"{r['cublas_us']:.1f} | {r['cublaslt_us']:.1f} | {r['swapped_us']:.1f} | {r['triton_us']:.1f} | "
                  f"{'/'.join(str(v) for v in cfg.values())} | {r['cublas_us'] / other:.2f}x |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "results": results}, indent=1))


def main_smoke(json_path: Optional[Path]) -> None:
    print(f"device: cpu (Triton interpreter), torch {torch.__version__}, triton {triton.__version__}, {ROWS} rows, "
          f"fp16; {len(SMOKE_SWEEP)} configurations")
    print("| model | gemm | N | K | triton max rel err | ok |\n|---|---|---|---|---|---|")
    results = [{"model": "tiny", **smoke(gemm)} for gemm in decode_gemms("tiny")]
    for r in results:
        print(f"| tiny | {r['gemm']} | {r['n']} | {r['k']} | {r['max_err']:.1e} | {r['max_err'] <= TOLERANCE} |")
    if json_path:
        json_path.write_text(json.dumps({"device": "cpu (Triton interpreter)", "results": results}, indent=1))
    if any(r["max_err"] > TOLERANCE for r in results):
        raise SystemExit(f"FAILED: an error above {TOLERANCE}")


if __name__ == "__main__":
    main()
