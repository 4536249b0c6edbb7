"""What a persistent decode kernel could save: a kernel boundary against a grid barrier, one GPU.

Why: the decode step of the Qwen2-0.5B shape launches ~10 kernels per layer (~250 per step) and
``decode_gemm_bench.py`` found no GEMM at 256 rows under ~2.9 us, whatever its bytes: each kernel pays a
launch gap, a ramp and a drain. A persistent kernel (one launch; its programs, one per SM, meet at a grid
barrier between the phases a layer is made of) pays a barrier instead, and can issue the next phase's
weight loads before it waits, since weights do not depend on the previous phase. This probe measures both
on the same work before anyone writes such a kernel.

The work of one phase, the same in every variant: each of ``programs`` programs reads a 256 x 896 bf16
activation slice written by another program in the previous phase (the dependency that forces the
boundary), reads its share of the phase's own weight slab (``--slab-mb``, a different slab per phase so
nothing stays in L2: 0 = the bare floor, 2.1 MB = Qwen2's q/k/v projection, 8.7 MB = its down projection,
17.4 MB = its gate and up projections),
and writes its activation slice plus one. ``phases`` phases make one replay; the activation must end at
exactly ``phases`` everywhere, which checks the barrier.

Variants:

- ``kernels``: one launch per phase, all captured in one CUDA graph (the decoder's structure today);
- ``kernels+pdl``: the same launched with programmatic dependent launch: each kernel starts while its
  predecessor runs, loads its first weight block, then waits (``griddepcontrol.wait``) for the predecessor;
- ``persistent``: one launch, a grid barrier (counter + acquire spin) between phases;
- ``persistent+prefetch``: the same, with the first block of the next phase's weights loaded before the
  barrier.

    python bench/persistent_probe.py [--phases 48] [--slab-mb 0,2.1,8.7] [--json PATH]
    python bench/persistent_probe.py --smoke    # CPU, Triton interpreter: 3 phases, one program, exactness only

``--smoke`` runs ``kernels``, ``persistent`` and ``persistent+prefetch`` through Triton's interpreter on the CPU
with one program (the interpreter runs a grid's programs one after another, so a barrier between several would
never meet) and checks that each ends exact; it times nothing (no CUDA graph) and leaves out ``kernels+pdl``
(``griddepcontrol`` is Hopper PTX).

Prints a table ending in the ratios of the kernels' per-phase time to each other variant's, per slab size.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable, Dict, List

from lib.smoke import SMOKE  # noqa: I001 (before triton: the interpreter)
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from lib.timers import copy_tbps, sync, time_graph

ROWS, HIDDEN = 256, 896  # the Qwen2-0.5B shape's activation at the GPU workload's batch
BLOCK_A = 2048  # activation elements per load
BLOCK_W = 16384  # weight elements per load: 32 KB in flight per program, since plain loads are not pipelined
VARIANTS = ("kernels", "persistent", "persistent+prefetch") if SMOKE else \
    ("kernels", "kernels+pdl", "persistent", "persistent+prefetch")
SPIN_LIMIT = tl.constexpr(1 << 22)  # a barrier that waits longer gives up (and the check then fails) instead of hanging


@triton.jit
def _phase(act, weights, zero, pid, programs, phase, act_share, w_share, w_phase, first_w,
           BLOCK_A: tl.constexpr, BLOCK_W: tl.constexpr):
    """One program's part of one phase: reads half ``phase % 2`` of ``act``, writes the other half
    (``first_w``: the first block of its weights, already loaded, or None)."""
    act_in = act + (phase % 2) * act_share * programs
    act_out = act + ((phase + 1) % 2) * act_share * programs
    w_base = weights + phase * w_phase + pid * w_share
    acc = tl.zeros([BLOCK_W], tl.float32)
    start = 0
    if first_w is not None:
        acc += first_w.to(tl.float32)
        start = BLOCK_W
    for off in range(start, w_share, BLOCK_W):
        idx = off + tl.arange(0, BLOCK_W)
        acc += tl.load(w_base + idx, mask=idx < w_share, other=0.0).to(tl.float32)
    w_sum = tl.sum(acc, 0) * zero
    src = (pid + 1) % programs  # a slice another program wrote
    for off in range(0, act_share, BLOCK_A):
        idx = off + tl.arange(0, BLOCK_A)
        ok = idx < act_share
        x = tl.load(act_in + src * act_share + idx, mask=ok, other=0.0, cache_modifier=".cg")
        tl.store(act_out + src * act_share + idx, (x.to(tl.float32) + 1.0 + w_sum).to(act_out.dtype.element_ty),
                 mask=ok)


@triton.jit
def _phase_kernel(act, weights, zero, phase, act_share, w_share, w_phase, BLOCK_A: tl.constexpr,
                  BLOCK_W: tl.constexpr, PDL: tl.constexpr):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    if PDL:
        # launched while the previous phase runs: load this phase's first weight block, then wait for it
        idx = tl.arange(0, BLOCK_W)
        first = tl.load(weights + phase * w_phase + pid * w_share + idx, mask=idx < w_share, other=0.0)
        gdc_launch_dependents()
        gdc_wait()
        _phase(act, weights, zero, pid, programs, phase, act_share, w_share, w_phase, first, BLOCK_A, BLOCK_W)
    else:
        _phase(act, weights, zero, pid, programs, phase, act_share, w_share, w_phase, None, BLOCK_A, BLOCK_W)


@triton.jit
def _grid_barrier(counter, target):
    """Every program's stores before it are visible to every program after it (cooperative groups' pattern:
    CTA barrier, a gpu-scope release add, an acquire spin, CTA barrier)."""
    tl.debug_barrier()
    seen = tl.atomic_add(counter, 1, sem="release", scope="gpu") + 1
    spins = 0
    while (seen < target) & (spins < SPIN_LIMIT):
        seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
        spins += 1
    tl.debug_barrier()


@triton.jit
def _persistent_kernel(act, weights, zero, counter, phases, act_share, w_share, w_phase,
                       BLOCK_A: tl.constexpr, BLOCK_W: tl.constexpr, PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    for phase in range(phases):
        if PREFETCH:
            # the barrier waits on the previous phase; this phase's first weight block does not
            idx = tl.arange(0, BLOCK_W)
            first = tl.load(weights + phase * w_phase + pid * w_share + idx, mask=idx < w_share, other=0.0)
            if phase > 0:
                _grid_barrier(counter, phase * programs)
            _phase(act, weights, zero, pid, programs, phase, act_share, w_share, w_phase, first, BLOCK_A, BLOCK_W)
        else:
            if phase > 0:
                _grid_barrier(counter, phase * programs)
            _phase(act, weights, zero, pid, programs, phase, act_share, w_share, w_phase, None, BLOCK_A, BLOCK_W)


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def probe(slab_bytes: int, phases: int, device: torch.device) -> Dict[str, float]:
    """us per phase of each variant for weight slabs of ``slab_bytes``, and whether each ended exact."""
    programs = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    # shares in whole 64-element units: Triton then knows every slice starts 16-byte aligned and vectorises
    act_share = _round_up(-(-ROWS * HIDDEN // programs), 64)
    w_share = _round_up(-(-slab_bytes // 2 // programs), 64)
    w_phase = w_share * programs
    act = torch.zeros((2, act_share * programs), dtype=torch.bfloat16, device=device)
    weights = torch.randn(max(1, w_phase * phases), dtype=torch.bfloat16, device=device)
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    zero = 0.0

    def kernels(pdl: bool) -> Callable[[int], None]:
        def call(_: int) -> None:
            for p in range(phases):
                _phase_kernel[(programs,)](act, weights, zero, p, act_share, w_share, w_phase, BLOCK_A=BLOCK_A,
                                           BLOCK_W=BLOCK_W, PDL=pdl, num_warps=8, launch_pdl=pdl)
        return call

    def persistent(prefetch: bool) -> Callable[[int], None]:
        def call(_: int) -> None:
            counter.zero_()
            _persistent_kernel[(programs,)](act, weights, zero, counter, phases, act_share, w_share, w_phase,
                                            BLOCK_A=BLOCK_A, BLOCK_W=BLOCK_W, PREFETCH=prefetch, num_warps=8)
        return call

    out: Dict[str, float] = {"slab_mb": slab_bytes / 1e6, "programs": programs}
    calls = {"kernels": kernels(False), "kernels+pdl": kernels(True), "persistent": persistent(False),
             "persistent+prefetch": persistent(True)}
    for name in VARIANTS:
        act.zero_()
        calls[name](0)
        sync(device)
        out[f"{name}_exact"] = bool((act[phases % 2] == phases).all())
        out[f"{name}_us"] = float("nan") if SMOKE else time_graph(calls[name], layers=1) / phases
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phases", type=int, default=48)
    ap.add_argument("--slab-mb", default="0,2.1,8.7,17.4")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, 3 phases, 0 and 0.1 MB, no times")
    args = ap.parse_args()
    if args.smoke:
        args.phases, args.slab_mb = 3, "0,0.1"
    device = torch.device("cpu" if SMOKE else "cuda")
    bw = float("nan") if SMOKE else copy_tbps(device) * 1e12  # bytes moved per second by a device-to-device copy
    rows: List[Dict[str, float]] = [probe(int(float(mb) * 1e6), args.phases, device)
                                    for mb in args.slab_mb.split(",")]
    name = "cpu (Triton interpreter)" if SMOKE else torch.cuda.get_device_name(device)
    print(f"device: {name}, torch {torch.__version__}, triton {triton.__version__}; {args.phases} phases; "
          f"copy rate {bw / 1e12:.2f} TB/s (read + write)")
    print("us per phase; 'bytes' is the phase's weights and activations at the copy rate; ratios are kernels' time "
          "over each variant's")
    print("| slab MB | bytes us | " + " | ".join(f"{v} us" for v in VARIANTS) + " | exact | "
          + " | ".join(f"kernels / {v}" for v in VARIANTS[1:]) + " |")
    print("|---" * (3 + 2 * len(VARIANTS) - 1) + "|")
    for r in rows:
        bytes_us = (r["slab_mb"] * 1e6 + 2 * 2 * ROWS * HIDDEN) / bw * 1e6
        exact = all(r[f"{v}_exact"] for v in VARIANTS)
        print(f"| {r['slab_mb']:.1f} | {bytes_us:.2f} | " + " | ".join(f"{r[f'{v}_us']:.2f}" for v in VARIANTS)
              + f" | {exact} | " + " | ".join(f"{r['kernels_us'] / r[f'{v}_us']:.2f}x" for v in VARIANTS[1:]) + " |")
    if args.json:
        args.json.write_text(json.dumps({"device": name, "phases": args.phases, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
