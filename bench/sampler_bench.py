"""Time of the Gumbel-max sampler kernels, one GPU: the noise's logarithms by the hardware
approximation (shipped, ``gumbel.FAST_LOG``) against the accurate ``logf`` (the baseline), in the same run.

Workload: 256 rows (the generator's benchmark batch), logits ~ N(0, 16) for SmolLM2's and Qwen2's
vocabularies, T = 1. Each time is the mean of ``--iters`` replays of a CUDA graph holding one call.
"same draws" is the fraction of rows, over ``--seeds`` seeds, whose draw equals ``gumbel_sample_torch``'s
on the same GPU tensors (accurate logs), and "lse err" the largest |lse - torch's lse|.

    python bench/sampler_bench.py [--iters 500] [--seeds 20] [--json PATH]
    python bench/sampler_bench.py --smoke    # CPU, Triton interpreter: 8 rows, vocabularies of 1000 and 3000, no times

``--smoke`` runs the same kernels through Triton's interpreter on the CPU and checks their draws and lse against
torch's; it cannot time them (no CUDA graph) nor run the approximate logarithms (``libdevice.fast_logf`` is
PTX), so it has the accurate rows only and no ratio line.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from lib.smoke import SMOKE  # noqa: I001 (before torch and triton: the interpreter)
import torch

from lib.timers import time_graph
from rlscale.engines.kernels import gumbel

ROWS = 8 if SMOKE else 256
VOCABS = {"smollm2-135m": 1000, "qwen2-0.5b": 3000} if SMOKE else {"smollm2-135m": 49152, "qwen2-0.5b": 151936}
DEVICE = "cpu" if SMOKE else "cuda"


def measure(vocab: int, fast: bool, iters: int, seeds: int) -> dict:
    gumbel.FAST_LOG = fast
    gen = torch.Generator(device=DEVICE).manual_seed(vocab)
    logits = (torch.randn(ROWS, vocab, device=DEVICE, generator=gen) * 4).to(torch.bfloat16)
    same, lse_err = 0, 0.0
    for s in range(seeds):
        seed = torch.tensor([1000 + s], device=DEVICE)
        draw, lse = gumbel.gumbel_sample_triton(logits, 1.0, seed)
        ref_draw, ref_lse = gumbel.gumbel_sample_torch(logits, 1.0, seed)
        same += int((draw == ref_draw).sum())
        lse_err = max(lse_err, float((lse - ref_lse).abs().max()))
    seed = torch.tensor([7], device=DEVICE)
    us = float("nan") if SMOKE else time_graph(lambda _: gumbel.gumbel_sample_triton(logits, 1.0, seed), layers=1,
                                               reps=iters)
    return {"vocab": vocab, "fast_log": fast, "us": us, "same_draws": same / (seeds * ROWS), "lse_err": lse_err,
            "gb_per_s": logits.numel() * logits.element_size() / us / 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, tiny sizes, no times")
    args = parser.parse_args()
    if args.smoke:
        args.seeds = min(args.seeds, 2)
    shipped = gumbel.FAST_LOG
    device = "cpu (Triton interpreter)" if SMOKE else torch.cuda.get_device_name()
    rows = []
    print(f"device: {device}, torch {torch.__version__}, {ROWS} rows, bf16 logits")
    print("| model | vocab | logs | us | GB/s read | same draws | lse err |")
    print("|---|---|---|---|---|---|---|")
    for name, vocab in VOCABS.items():
        for fast in (False,) if SMOKE else (False, True):
            r = measure(vocab, fast, args.iters, args.seeds)
            rows.append({"model": name, **r})
            print(f"| {name} | {vocab} | {'approx' if fast else 'accurate'} | {r['us']:.1f} | {r['gb_per_s']:.0f} "
                  f"| {r['same_draws']:.4f} | {r['lse_err']:.1e} |")
    gumbel.FAST_LOG = shipped
    for name in VOCABS if not SMOKE else ():
        base, fast = (r["us"] for r in rows if r["model"] == name)
        print(f"{name}: accurate / approx logs = {base / fast:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
