"""Where the GPU time of one decode step and of one learner update goes: torch.profiler's
kernel table for a model shape of ``bench/lib/shapes.py``, random weights, bf16 head.

Decode: ``steps`` decode steps of the compiled static decoder outside CUDA graphs (the same kernels a
graph replays) at a fixed kv_len; learner: one update of the compiled torch learner on a synthetic
right-padded batch (prompt + completion tokens, all in the loss). Kernels are grouped by name and
printed with their share of the profiled GPU time.

    python bench/profile_step.py --model qwen2-0.5b [--rows 256 --kv-len 384 --micro-rows 64 --micro-batch N --skip-decode]
        [--graph --skip-learner]
    python bench/profile_step.py --device cpu --tiny [--graph]    # CPU: the tiny shape, 4 rows, kv_len 32, 2 steps

``--device cpu --tiny`` profiles the same three parts on the tiny shape of ``bench/lib/shapes.py`` (the graph
loop on ``lib.workloads.CPU_WORK``) and groups the CPU ops instead of the GPU kernels; on the CPU the decoder and
the learner are not compiled and the decode loop replays no CUDA graph, so the table shows torch's eager ops.
"""
from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from lib.decode import decode_workload
from lib.runs import run_config
from lib.shapes import SHAPES, build_model, peaks
from lib.timers import release, sync, timed
from lib.workloads import CPU_WORK, GPU_WORK, Workload
from rlscale.core.types import TrainBatch
from rlscale.engines.generators.static_decoder import StaticKVDecoder
from rlscale.engines.learners.build import build_learner
from rlscale.train.components import learner_settings_of


def activity(dev: torch.device) -> ProfilerActivity:
    return ProfilerActivity.CUDA if dev.type == "cuda" else ProfilerActivity.CPU


def kernel_table(prof, top: int, per: int = 0, dev: torch.device = torch.device("cuda")) -> str:
    """Kernels grouped by name: total us, calls, share of all kernel time (and the total per ``per`` steps);
    on the CPU the ops by their own CPU time."""
    if dev.type == "cuda":
        rows = [(e.key, e.device_time_total, e.count) for e in prof.key_averages()
                if e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA]
    else:
        rows = [(e.key, e.self_cpu_time_total, e.count) for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(t for _, t, _ in rows)
    rows.sort(key=lambda r: -r[1])
    launches = sum(c for _, _, c in rows)
    each = f" ({total / per / 1e3:.3f} ms and {launches / per:.0f} launches per step)" if per else ""
    lines = [f"kernel time {total / 1e3:.2f} ms in {launches} launches{each}",
             "| share | us | calls | kernel |", "|---|---|---|---|"]
    lines += [f"| {t / total:.1%} | {t:.0f} | {c} | {name[:110]} |" for name, t, c in rows[:top]]
    return "\n".join(lines)


def profile_decode(model, rows: int, kv_len: int, steps: int, top: int) -> str:
    on_gpu = next(model.parameters()).is_cuda
    dec = StaticKVDecoder(model, fp32_head=False, compiled=on_gpu)
    dev = dec.device
    cache = dec.new_cache(rows, kv_len)
    cache.mask.fill_(True)
    dec.rope_table(kv_len)
    token = torch.randint(0, min(1000, model.config.vocab_size), (rows,), device=dev)
    pos = torch.full((rows,), kv_len - 1, device=dev)
    slot = torch.tensor([kv_len - 1], device=dev)

    def step():
        return dec.logits(dec.decode(cache, token, pos, slot, kv_len))

    for _ in range(3):
        step()
    _, seconds = timed(lambda: [step() for _ in range(steps)], dev)
    with profile(activities=[activity(dev)]) as prof:
        for _ in range(steps):
            step()
        sync(dev)
    return f"decode: {rows} rows, kv_len {kv_len}, eager launch {seconds / steps * 1e3:.2f} ms/step\n" + \
        kernel_table(prof, top, dev=dev)


def profile_graph_steps(shape_name: str, work: Workload, dev: torch.device, top: int) -> str:
    """The decode loop as the generator runs it (``GraphDecoder``, one CUDA graph replay per step, the
    sampler and phase bookkeeping included) on the GPU workload (``lib.workloads.GPU_WORK``): wall time per step
    against the kernel time the profiler sees inside the replays (the difference is launch gaps)."""
    engine, prompts, steps = decode_workload(shape_name, work, dev.type)
    bucket = engine.bucket(len(prompts), len(prompts[0]))
    budgets = torch.full((len(prompts),), work.think)
    bucket.run(prompts, budgets, 2, steps, 0, None)  # captures the graphs
    _, seconds = timed(lambda: bucket.run(prompts, budgets, 3, steps, 0, None), dev)
    with profile(activities=[activity(dev)]) as prof:
        bucket.run(prompts, budgets, 3, steps, 0, None)
        sync(dev)
    return (f"graph replays: {len(prompts)} rows, {steps} steps (prefill included), "
            f"{seconds / steps * 1e3:.3f} ms/step wall\n" + kernel_table(prof, top, per=steps, dev=dev))


def profile_learner(shape_name: str, model, rows: int, micro_batch: int, top: int) -> str:
    work = GPU_WORK
    dev = next(model.parameters()).device
    cfg = run_config(work, SHAPES[shape_name], False, "ppo", dev.type)
    cfg.batch.micro_batch = micro_batch or cfg.batch.micro_batch
    learner = build_learner(learner_settings_of(cfg, cfg.engine.compile and next(model.parameters()).is_cuda), model)
    width = work.prompt_len + work.completion
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, min(1000, model.config.vocab_size), (rows, width), generator=gen)
    mask = torch.zeros(rows, width - 1)
    mask[:, work.prompt_len - 1:] = 1.0
    batch = TrainBatch(ids, torch.ones_like(ids), torch.full((rows, width - 1), -7.0) * mask, mask,
                       torch.zeros(rows, width - 1, dtype=torch.long), torch.ones(rows), torch.arange(rows) // 8)
    adv = torch.tensor([1.0, -1.0]).repeat(rows // 2)
    weights = mask / mask.sum()
    learner.step(batch, adv, weights)  # compile
    release(dev)
    _, seconds = timed(lambda: learner.step(batch, adv, weights), dev)
    with profile(activities=[activity(dev)]) as prof:
        learner.step(batch, adv, weights)
        sync(dev)
    tokens = rows * width
    peak = f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if dev.type == "cuda" else "n/a"
    return (f"learner: {rows} rows x {width} tokens, micro-batch {cfg.batch.micro_batch}, {seconds:.3f} s "
            f"({tokens / seconds:.4g} tokens/s), peak {peak}\n" + kernel_table(prof, top, dev=dev))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m", choices=[m for m in SHAPES if m != "tiny"])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--kv-len", type=int, default=384)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--micro-rows", type=int, default=64, help="rows of the learner batch")
    ap.add_argument("--micro-batch", type=int, default=0, help="learner micro-batch rows (default: the shape's)")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--graph", action="store_true", help="also profile the generator's graph-replayed decode loop")
    ap.add_argument("--skip-learner", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tiny shape at small sizes (with --device cpu)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if args.tiny:
        args.model, args.rows, args.kv_len, args.steps, args.micro_rows = "tiny", 4, 32, 2, 4
    model = build_model(SHAPES[args.model], torch.bfloat16, args.device)
    print(f"## {args.model} on {peaks(dev)[2]}\n", flush=True)
    if not args.skip_decode:
        print(profile_decode(model, args.rows, args.kv_len, args.steps, args.top) + "\n", flush=True)
    if args.graph:
        print(profile_graph_steps(args.model, CPU_WORK if args.tiny else GPU_WORK, dev, args.top) + "\n", flush=True)
    if not args.skip_learner:
        print(profile_learner(args.model, model, args.micro_rows, args.micro_batch, args.top), flush=True)


if __name__ == "__main__":
    main()
