"""Decode-loop time of the torch generator's GPU path under torch.compile variants, one GPU.

For each model shape of ``bench/lib/shapes.py`` (random weights, bf16 head, its workload: 256 rows, 128-token
prompts, 512 decode steps), the decode loop of ``GraphDecoder`` (CUDA graphs, prefill excluded) is timed with
the decoder's per-layer graphs compiled

- ``default``: as shipped (``torch.compile(dynamic=False, fullgraph=True)``, cuBLAS GEMMs, inductor's combo
  kernels, which launch the independent kernels of one graph, the rotation of q and the rotation and cache
  write of k and v, as one);
- ``max-autotune``: inductor also benchmarks Triton GEMM templates for each GEMM shape and may fuse
  element-wise work into them (the generator captures its own CUDA graphs);
- ``no-pattern-matcher``: inductor's post-grad pattern passes off (they once turned the residual add into
  an ``addmm`` that first copies the residual into its output; ``static_decoder.residual_add`` now prevents
  that);
- ``no-combo-kernels``: without the horizontal fusion;
- ``coordinate-descent``: inductor also tunes the launch configuration of its element-wise and reduction
  kernels by coordinate descent;
- ``max-autotune-prologue``: ``max-autotune`` with prologue fusion on (element-wise producers such as
  ``silu(gate) * up`` fused into the Triton GEMM that reads them);
- ``pdl``: inductor's Triton kernels launched with programmatic dependent launch (Hopper): a kernel's blocks
  start while its predecessor finishes and wait (``griddepcontrol.wait``) only before the first load of
  what the predecessor wrote.

Prints a table: ms per decode step, fraction of the HBM bound, and the ratio against ``default``.

    python bench/decode_compile_variants.py [--models smollm2-135m,qwen2-0.5b] [--variants default,...] [--json PATH]
    python bench/decode_compile_variants.py --device cpu --tiny    # CPU: the tiny shape on the CPU workload

``--device cpu --tiny`` runs the same measurement (workload, decode loop, variants, table) on the tiny shape of
``bench/lib/shapes.py`` and ``lib.workloads.CPU_WORK``; the decoder compiles only on a GPU and captures no CUDA
graphs on the CPU, so there every variant times the same eager loop and the HBM bound is nan: the mode checks
that the bench runs, not inductor's options.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lib.decode import decode_loop, decode_workload
from lib.shapes import peaks
from lib.timers import release
from lib.workloads import CPU_WORK, GPU_WORK, Workload
from rlscale.engines.generators import static_decoder

VARIANTS = {  # inductor options merged over the decoder's own
    "default": {},
    "max-autotune": {"max_autotune": True},
    "no-pattern-matcher": {"pattern_matcher": False},
    "no-combo-kernels": {"combo_kernels": False},
    "coordinate-descent": {"coordinate_descent_tuning": True},
    "max-autotune-prologue": {"max_autotune": True, "prologue_fusion": True},
    "pdl": {"triton.enable_pdl": True},
}


def compile_with(options: dict):
    """``torch.compile`` with ``options`` merged over the caller's."""
    real_compile = torch.compile

    def compile_(fn, **kwargs):
        return real_compile(fn, **{**kwargs, "options": {**kwargs.get("options", {}), **options}})
    return compile_


def measure(shape_name: str, variant: str, work: Workload, dev: torch.device) -> dict:
    real_compile = torch.compile
    torch._dynamo.reset()
    try:
        static_decoder.torch.compile = compile_with(VARIANTS[variant])
        engine, prompts, steps = decode_workload(shape_name, work, dev.type)
        _, bw, _ = peaks(dev)
        rec = decode_loop(engine, prompts, work, steps, dev, bw, float("nan"))
    finally:
        static_decoder.torch.compile = real_compile
    return {"ms_per_step": rec["decode_seconds"] / steps * 1e3, "hbm_fraction": rec["hbm_fraction"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="smollm2-135m,qwen2-0.5b")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, default first")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny shape on the CPU workload (with --device cpu)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    models, work = ("tiny", CPU_WORK) if args.tiny else (args.models, GPU_WORK)
    results = {}
    print(f"{peaks(dev)[2]}; torch {torch.__version__}")
    print("| model | variant | ms / decode step | HBM bound | default ms / this ms |\n|---|---|---|---|---|", flush=True)
    for m in models.split(","):
        for variant in args.variants.split(","):
            rec = results.setdefault(m, {})[variant] = measure(m, variant, work, dev)
            base = results[m]["default"]["ms_per_step"]
            print(f"| {m} | {variant} | {rec['ms_per_step']:.3f} | {rec['hbm_fraction']:.1%} | "
                  f"{base / rec['ms_per_step']:.2f}x |", flush=True)
            release(dev)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
