"""Each piece of a decode layer: the fused Triton kernels (rlscale.engines.fused_decode) against the unfused
pieces (torch.compile around cuBLAS, as ``static_decoder``'s compiled functions), one GPU (issue 7).

For gpu_bench's shapes at 256 rows, one CUDA graph per (piece, variant) holds one call per layer, each layer
with its own weights (so they do not sit in L2 between calls), and the time per call is printed:

- ``qkv``: input RMSNorm, q/k/v projection (+ bias), rotary embedding, k and v into the cache slot;
- ``o``: attention output projection added to the residual stream;
- ``gate_up``: post-attention RMSNorm, gate/up projection, SiLU(gate) * up;
- ``down``: down projection added to the residual stream;
- ``attention``: the decode attention kernel at kv_len 448, plain and with programmatic dependent launch.

Fused variants run with PDL (their kernels prefetch their weights before they wait), over a few tiles
(bm/bn/bk/warps/stages); ``fold`` variants put the norm weight into the GEMM weight and scale rows by rstd
after the one K pass. The table ends, per piece, in the ratio unfused / best fused.

    python bench/fused_decode_bench.py [--models qwen2-0.5b,smollm2-135m] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decode_attention_bench import time_graph  # noqa: E402
from bench.gpu_bench import SHAPES  # noqa: E402
from rlscale.engines.decode_attention import decode_attention  # noqa: E402
from rlscale.engines.fused_decode import Tiles, linear_residual, norm_qkv, norm_swiglu  # noqa: E402
from rlscale.engines.static_decoder import _Layer, residual_add, rms_norm, step_query, swiglu  # noqa: E402

ROWS, SLOTS, SLOT, KV_LEN, HEAD_DIM, EPS = 256, 768, 447, 448, 64, 1e-6
QKV_TILES = [Tiles(64, 64, 128, 4, 3), Tiles(64, 64, 64, 4, 4), Tiles(128, 64, 64, 8, 3)]
SWIGLU_TILES = [Tiles(64, 128, 64, 4, 4), Tiles(128, 128, 64, 8, 3), Tiles(64, 256, 64, 8, 3), Tiles(128, 64, 64, 4, 4)]
RESIDUAL_TILES = [Tiles(64, 32, 128, 4, 4), Tiles(64, 64, 128, 4, 3), Tiles(128, 64, 64, 4, 4), Tiles(64, 64, 64, 4, 5)]


def random_layers(shape, n: int, dev: torch.device) -> List[_Layer]:
    def w(*size, scale=0.02):
        return (torch.randn(*size, device=dev) * scale).to(torch.bfloat16)

    qkv_rows = (shape.heads + 2 * shape.kv_heads) * HEAD_DIM
    bias = shape.family == "qwen2"
    return [_Layer(ln1=1 + w(shape.hidden), ln2=1 + w(shape.hidden), qkv=w(qkv_rows, shape.hidden),
                   qkv_bias=w(qkv_rows) if bias else None, o=w(shape.hidden, shape.heads * HEAD_DIM), o_bias=None,
                   q_norm=None, k_norm=None, gate_up=w(2 * shape.intermediate, shape.hidden),
                   down=w(shape.hidden, shape.intermediate)) for _ in range(n)]


def bench_shape(name: str, dev: torch.device) -> List[Dict]:
    shape = SHAPES[name]
    n = shape.layers
    layers = random_layers(shape, n, dev)
    folded_qkv = [layer.qkv * layer.ln1[None, :] for layer in layers]
    folded_gate_up = [layer.gate_up * layer.ln2[None, :] for layer in layers]
    x = torch.randn(ROWS, shape.hidden, device=dev).to(torch.bfloat16)
    a = torch.randn(ROWS, shape.heads * HEAD_DIM, device=dev).to(torch.bfloat16)
    h = torch.randn(ROWS, shape.intermediate, device=dev).to(torch.bfloat16)
    kv = [torch.randn(ROWS, shape.kv_heads, SLOTS, 2 * HEAD_DIM, device=dev).to(torch.bfloat16) for _ in range(n)]
    mask = torch.ones(ROWS, SLOTS, dtype=torch.bool, device=dev)
    cos, sin = torch.randn(1024, HEAD_DIM, device=dev).to(torch.bfloat16), torch.randn(1024, HEAD_DIM, device=dev).to(torch.bfloat16)
    pos = torch.randint(0, 1024, (ROWS,), device=dev)
    slot = torch.tensor([SLOT], device=dev)
    q = torch.empty(ROWS, shape.heads * HEAD_DIM, dtype=torch.bfloat16, device=dev)
    out_h = torch.empty_like(h)
    dims = (shape.heads, shape.kv_heads, HEAD_DIM)
    groups = shape.heads // shape.kv_heads
    compile_ = lambda fn: torch.compile(fn, dynamic=False, fullgraph=True)  # noqa: E731
    cos_rows, sin_rows = cos[pos], sin[pos]  # gathered once per step in the unfused decoder
    query = compile_(step_query)
    add_projection = compile_(lambda r, inp, w: residual_add(r, F.linear(inp, w)))
    gated = compile_(lambda r, ln, w: swiglu(F.linear(rms_norm(r, ln, EPS), w)))
    unfused = {
        "qkv": lambda i: query(x, layers[i], cos_rows, sin_rows, dims, EPS, kv[i], slot),
        "o": lambda i: add_projection(x, a, layers[i].o),
        "gate_up": lambda i: gated(x, layers[i].ln2, layers[i].gate_up),
        "down": lambda i: add_projection(x, h, layers[i].down),
    }
    fused: Dict[str, Dict[str, Callable[[int], torch.Tensor]]] = {"qkv": {}, "o": {}, "gate_up": {}, "down": {}}
    for t in QKV_TILES:
        for fold in (False, True):
            qkv_w = folded_qkv if fold else [layer.qkv for layer in layers]
            fused["qkv"][f"{'fold ' if fold else ''}{t}"] = (
                lambda i, t=t, fold=fold, qkv_w=qkv_w: norm_qkv(
                    x, layers[i].ln1, qkv_w[i], layers[i].qkv_bias, None, None, cos, sin, pos, kv[i], slot, q,
                    shape.heads, shape.kv_heads, EPS, True, Tiles(t.bm, HEAD_DIM, t.bk, t.warps, t.stages), fold))
    for t in SWIGLU_TILES:
        for fold in (False, True):
            gu = folded_gate_up if fold else [layer.gate_up for layer in layers]
            fused["gate_up"][f"{'fold ' if fold else ''}{t}"] = (
                lambda i, t=t, fold=fold, gu=gu: norm_swiglu(x, layers[i].ln2, gu[i], out_h, EPS, True, t, fold))
    for t in RESIDUAL_TILES:
        fused["o"][str(t)] = lambda i, t=t: linear_residual(a, layers[i].o, None, x, True, t)
        fused["down"][str(t)] = lambda i, t=t: linear_residual(h, layers[i].down, None, x, True, t)
    rows = []
    for piece, call in unfused.items():
        base = time_graph(call, n)
        rows.append(dict(model=name, piece=piece, variant="unfused (compile + cuBLAS)", us=base, vs_unfused=1.0))
        print(f"| {name} | {piece} | unfused | {base:.2f} | 1.00x |", flush=True)
        for variant, fn in fused[piece].items():
            try:
                us = time_graph(fn, n)
            except Exception as err:  # a tile that does not fit (shared memory) is reported, not fatal
                print(f"| {name} | {piece} | {variant} | failed: {type(err).__name__} | |", flush=True)
                continue
            rows.append(dict(model=name, piece=piece, variant=variant, us=us, vs_unfused=base / us))
            print(f"| {name} | {piece} | {variant} | {us:.2f} | {base / us:.2f}x |", flush=True)
    for pdl in (False, True):
        us = time_graph(lambda i, pdl=pdl: decode_attention(q.view(ROWS, shape.kv_heads, groups, HEAD_DIM),
                                                            kv[i][..., :HEAD_DIM], kv[i][..., HEAD_DIM:], mask,
                                                            KV_LEN, pdl=pdl), n)
        rows.append(dict(model=name, piece="attention", variant=f"pdl={pdl}", us=us, vs_unfused=float("nan")))
        print(f"| {name} | attention | pdl={pdl} | {us:.2f} | |", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen2-0.5b,smollm2-135m")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)}; torch {torch.__version__}; {ROWS} rows; us per call (one call per layer "
          "in a CUDA graph)")
    print("| model | piece | variant | us | unfused / this |\n|---|---|---|---|---|")
    rows = [r for m in args.models.split(",") for r in bench_shape(m, dev)]
    print("\nbest fused per piece:")
    for m in args.models.split(","):
        for piece in ("qkv", "o", "gate_up", "down"):
            mine = [r for r in rows if r["model"] == m and r["piece"] == piece]
            best = max(mine[1:], key=lambda r: r["vs_unfused"], default=None)
            if best:
                print(f"  {m} {piece}: unfused {mine[0]['us']:.2f} us, best fused {best['us']:.2f} us ({best['variant']}), "
                      f"ratio unfused / fused {best['vs_unfused']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
