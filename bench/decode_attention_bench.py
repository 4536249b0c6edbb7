"""Decode-step attention: the Triton kernel (rlscale.engines.kernels.decode_attention) against SDPA, on one GPU.

For the generator's two model shapes (256 rows; SmolLM2-135M: 3 KV heads x 3 query groups, Qwen2-0.5B:
2 x 7; head_dim 64, bf16, a 768-slot cache) at kv_len 192, 384 and 704 it checks the kernel's max abs
error against the fp32 reference (< 2e-2) and times both, eager (back-to-back calls) and replayed from a
CUDA graph (the generator's way; the graph holds one call per layer). Every timed call reads another of
``LAYERS`` caches, so the bytes do not sit in L2 between calls, as in the decoder where each layer has its
own cache. Bytes read = K + V of the kv_len attended slots; rows have up to 32 slots of left padding,
which both implementations read anyway. SDPA is called as the decoder called it: default backend, the
additive [B, 1, 1, kv_len] bias built once outside the timed region.

It then sweeps the kernel's launch configurations (block_n x splits x warps/stages, in graphs, each
also checked) and reports the default plan's time against the best, to tune ``plan``. A device copy
(read + write of 1 GiB) gives the reachable HBM bandwidth.

    python bench/decode_attention_bench.py [--json PATH] [--no-sweep]
    TRITON_INTERPRET=1 python bench/decode_attention_bench.py --smoke    # CPU: tiny sizes, correctness only
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

import lib.smoke  # noqa: F401, E402 (before triton: --smoke's interpreter)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lib.timers import copy_tbps, tbps, time_eager, time_graph  # noqa: E402
from rlscale.engines.kernels.decode_attention import Plan, decode_attention, decode_attention_reference, plan  # noqa: E402

MODELS = {"smollm2-135m": (3, 3), "qwen2-0.5b": (2, 7)}  # kv_heads, query heads per KV head
HEAD_DIM = 64
TOLERANCE = 2e-2
FULL = dict(batch=256, slots=768, kv_lens=(192, 384, 704), layers=8)  # 8 caches: >= 300 MB a graph replay
SMOKE = dict(batch=4, slots=96, kv_lens=(40, 70), layers=1)
SWEEP = [Plan(block_n=b, splits=s, num_warps=w, num_stages=st)
         for b in (32, 64, 128) for s in (1, 2, 4) for w, st in ((4, 2), (4, 3), (8, 2))]


@dataclass
class Inputs:
    q: torch.Tensor  # [B, KVH, G, D]
    keys: torch.Tensor  # [layers, B, KVH, S, D], the first half of the decoder's [layers, B, KVH, S, 2D] cache
    values: torch.Tensor  # its second half
    mask: torch.Tensor  # [B, S]
    bias: torch.Tensor  # [B, 1, 1, kv_len], SDPA's form of the mask
    kv_len: int

    def bytes_read(self) -> int:
        batch, kv_heads, _, head_dim = self.q.shape
        return 2 * batch * kv_heads * self.kv_len * head_dim * self.keys.element_size()


def make_inputs(kv_heads: int, groups: int, kv_len: int, batch: int, slots: int, layers: int,
                device: torch.device) -> Inputs:
    gen = torch.Generator(device=device).manual_seed(kv_len)
    q = torch.randn((batch, kv_heads, groups, HEAD_DIM), generator=gen, device=device).bfloat16()
    kv = torch.randn((layers, batch, kv_heads, slots, 2 * HEAD_DIM), generator=gen, device=device, dtype=torch.bfloat16)
    keys, values = kv[..., :HEAD_DIM], kv[..., HEAD_DIM:]
    padding = torch.randint(0, min(32, kv_len // 2), (batch, 1), generator=gen, device=device)
    mask = torch.arange(slots, device=device)[None, :] >= padding
    bias = torch.zeros((batch, 1, 1, kv_len), dtype=q.dtype, device=device)
    bias.masked_fill_(~mask[:, None, None, :kv_len], float("-inf"))
    return Inputs(q, keys, values, mask, bias, kv_len)


def triton_call(x: Inputs, config: Optional[Plan] = None) -> Callable[[int], torch.Tensor]:
    return lambda i: decode_attention(x.q, x.keys[i], x.values[i], x.mask, x.kv_len, config=config)


def sdpa_call(x: Inputs) -> Callable[[int], torch.Tensor]:
    return lambda i: F.scaled_dot_product_attention(x.q, x.keys[i, :, :, :x.kv_len], x.values[i, :, :, :x.kv_len],
                                                    attn_mask=x.bias)


def max_error(call: Callable[[int], torch.Tensor], x: Inputs) -> float:
    """Max abs error of layer 0's output against the fp32 reference of the same (bf16) inputs."""
    ref = decode_attention_reference(x.q.float(), x.keys[0].float(), x.values[0].float(), x.mask, x.kv_len)
    return (call(0).float() - ref).abs().max().item()


def run(sizes: dict, device: torch.device, sweep: bool, timed: bool) -> dict:
    results: Dict[str, List[dict]] = {"cases": [], "sweep": []}
    failures = []
    for model, (kv_heads, groups) in MODELS.items():
        for kv_len in sizes["kv_lens"]:
            x = make_inputs(kv_heads, groups, kv_len, sizes["batch"], sizes["slots"], sizes["layers"], device)
            default = plan(sizes["batch"] * kv_heads, kv_len, device)
            row = dict(model=model, kv_len=kv_len, mb_read=x.bytes_read() / 1e6, plan=asdict(default),
                       err_triton=max_error(triton_call(x), x), err_sdpa=max_error(sdpa_call(x), x))
            if timed:
                for name, call in (("sdpa", sdpa_call(x)), ("triton", triton_call(x))):
                    row[f"{name}_eager_us"] = time_eager(call, sizes["layers"])
                    row[f"{name}_graph_us"] = time_graph(call, sizes["layers"])
                row["ratio_graph"] = row["sdpa_graph_us"] / row["triton_graph_us"]
                row["ratio_eager"] = row["sdpa_eager_us"] / row["triton_eager_us"]
            results["cases"].append(row)
            if row["err_triton"] >= TOLERANCE:
                failures.append(f"{model} kv_len {kv_len} default plan")
            print_case(row, x.bytes_read(), timed)
            for config in SWEEP if sweep else []:
                entry = dict(model=model, kv_len=kv_len, plan=asdict(config),
                             err=max_error(triton_call(x, config), x))
                if entry["err"] >= TOLERANCE:
                    failures.append(f"{model} kv_len {kv_len} {config}")
                if timed:
                    entry["graph_us"] = time_graph(triton_call(x, config), sizes["layers"])
                    entry["tbps"] = tbps(x.bytes_read(), entry["graph_us"])
                results["sweep"].append(entry)
            if sweep:
                print_sweep(results["sweep"], model, kv_len, row, timed)
            del x
    results["failures"] = failures
    return results


def print_case(row: dict, nbytes: int, timed: bool) -> None:
    line = (f"| {row['model']:<13} | {row['kv_len']:>6} | {row['mb_read']:>8.1f} | {row['err_triton']:.1e} |"
            f" {row['err_sdpa']:.1e} |")
    if timed:
        for name in ("sdpa", "triton"):
            line += (f" {row[f'{name}_eager_us']:>7.1f} | {row[f'{name}_graph_us']:>7.1f} |"
                     f" {tbps(nbytes, row[f'{name}_graph_us']):>5.2f} |")
        line += f" {row['ratio_graph']:>5.2f} | {row['ratio_eager']:>5.2f} |"
    print(line, flush=True)


def print_sweep(entries: List[dict], model: str, kv_len: int, row: dict, timed: bool) -> None:
    mine = [e for e in entries if e["model"] == model and e["kv_len"] == kv_len]
    worst = max(e["err"] for e in mine)
    if not timed:
        print(f"|   sweep: {len(mine)} plans, max err {worst:.1e}", flush=True)
        return
    best = min(mine, key=lambda e: e["graph_us"])
    print(f"|   sweep: {len(mine)} plans, max err {worst:.1e}; best {best['plan']} {best['graph_us']:.1f} us "
          f"{best['tbps']:.2f} TB/s (default {row['triton_graph_us']:.1f} us)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, tiny sizes, correctness only")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false", help="skip the launch-configuration sweep")
    args = parser.parse_args()
    if args.smoke:
        device, sizes, timed = torch.device("cpu"), SMOKE, False
    elif torch.cuda.is_available():
        device, sizes, timed = torch.device("cuda"), FULL, True
    else:
        print("needs a CUDA device (or --smoke with TRITON_INTERPRET=1 on CPU)", file=sys.stderr)
        return 2
    import triton

    header = dict(device=torch.cuda.get_device_name(device) if timed else "cpu (Triton interpreter)",
                  torch=torch.__version__, triton=triton.__version__, sizes=sizes)
    if timed:
        header["copy_tbps"] = copy_tbps(device)
    print(json.dumps(header), flush=True)
    columns = "| model | kv_len | MB read | err triton | err sdpa |"
    if timed:
        columns += (" sdpa eager us | sdpa graph us | sdpa TB/s | triton eager us | triton graph us | triton TB/s |"
                    " sdpa/triton graph | sdpa/triton eager |")
    print(columns + "\n|" + "---|" * (columns.count("|") - 1), flush=True)
    results = run(sizes, device, args.sweep, timed)
    if timed:
        for mode in ("graph", "eager"):
            ratios = [row[f"ratio_{mode}"] for row in results["cases"]]
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"SDPA us / Triton us ({mode}): geometric mean {mean:.2f}, min {min(ratios):.2f}, "
                  f"max {max(ratios):.2f}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(header, **results), indent=1))
    for failure in results["failures"]:
        print(f"FAILED (max abs error >= {TOLERANCE}): {failure}", file=sys.stderr)
    return 1 if results["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
