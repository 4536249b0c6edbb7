"""Where the GPU time of one decode step and of one learner update goes: torch.profiler's
kernel table for a model shape of ``bench/lib/shapes.py``, random weights, bf16 head.

Decode: ``steps`` decode steps of the compiled static decoder outside CUDA graphs (the same kernels a
graph replays) at a fixed kv_len; learner: one update of the compiled torch learner on a synthetic
right-padded batch (prompt + completion tokens, all in the loss). Kernels are grouped by name and
printed with their share of the profiled GPU time.

    python bench/profile_step.py --model qwen2-0.5b [--rows 256 --kv-len 384 --micro-rows 64 --micro-batch N --skip-decode]
        [--graph --skip-learner]
    python bench/profile_step.py --model qwen3-1.7b --rows 48 --kv-len 8192,14912 --own-lengths --skip-learner
        [--splits 0,4]
    python bench/profile_step.py --device cpu --tiny [--graph]    # CPU: the tiny shape, 4 rows, kv_len 32, 2 steps

``--own-lengths`` profiles the refilling generator's step (``graph_decode.RefillBucket``): every row at its own
slot and length, drawn uniformly from [kv_len / 8, kv_len] (seed 0), attention reading each row's live slots only.
The long shapes of ``long_sequence_bench`` (Qwen3-1.7B, 4B) profile the decode alone (``--skip-learner``).
``--kv-len`` and ``--splits`` take comma lists: one table per pair; a split count other than 0 replaces the
attention kernel's default plan (``decode_attention.plan``). Each table ends with the bytes a step must read
(weights and the live KV cache) over the step's kernel time, against the card's HBM bandwidth.

``--device cpu --tiny`` profiles the same three parts on the tiny shape of ``bench/lib/shapes.py`` (the graph
loop on ``lib.workloads.CPU_WORK``) and groups the CPU ops instead of the GPU kernels; on the CPU the decoder and
the learner are not compiled and the decode loop replays no CUDA graph, so the table shows torch's eager ops.
"""
from __future__ import annotations

import argparse
from functools import partial

import torch
from torch.profiler import ProfilerActivity, profile

from lib.decode import decode_workload
from long_sequence_bench import SHAPES as LONG_SHAPES, build_model as build_long_model
from lib.runs import run_config
from lib.shapes import SHAPES, build_model, peaks
from lib.timers import release, sync, timed
from lib.workloads import CPU_WORK, GPU_WORK, Workload
from rlscale.core.types import TrainBatch
from rlscale.engines.generators.static_decoder import StaticKVDecoder
from rlscale.engines.kernels.decode_attention import Plan, available, decode_attention
from rlscale.engines.learners.build import build_learner
from rlscale.train.components import learner_settings_of


def activity(dev: torch.device) -> ProfilerActivity:
    return ProfilerActivity.CUDA if dev.type == "cuda" else ProfilerActivity.CPU


def kernel_rows(prof, dev: torch.device) -> list[tuple[str, float, int]]:
    """(name, us, calls) of every kernel the profiler saw; on the CPU every op by its own CPU time."""
    if dev.type == "cuda":
        return [(e.key, e.device_time_total, e.count) for e in prof.key_averages()
                if e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA]
    return [(e.key, e.self_cpu_time_total, e.count) for e in prof.key_averages() if e.self_cpu_time_total > 0]


def kernel_table(prof, top: int, per: int = 0, dev: torch.device = torch.device("cuda")) -> str:
    """Kernels grouped by name: total us, calls, share of all kernel time (and the total per ``per`` steps);
    on the CPU the ops by their own CPU time."""
    rows = sorted(kernel_rows(prof, dev), key=lambda r: -r[1])
    total = sum(t for _, t, _ in rows)
    launches = sum(c for _, _, c in rows)
    each = f" ({total / per / 1e3:.3f} ms and {launches / per:.0f} launches per step)" if per else ""
    lines = [f"kernel time {total / 1e3:.2f} ms in {launches} launches{each}",
             "| share | us | calls | kernel |", "|---|---|---|---|"]
    lines += [f"| {t / total:.1%} | {t:.0f} | {c} | {name[:110]} |" for name, t, c in rows[:top]]
    return "\n".join(lines)


def profile_decode(dec: StaticKVDecoder, rows: int, kv_len: int, steps: int, top: int, own_lengths: bool = False,
                   splits: int = 0, *, attend) -> str:
    """``steps`` decode steps at ``kv_len`` of ``rows`` rows (``--own-lengths``: the refilling generator's rows,
    module docstring), the kernel table and the step's bytes over its kernel time; ``attend`` is the decoder's
    own attention, which ``splits`` replaces by the kernel at that many KV splits."""
    dev = dec.device
    cache = dec.new_cache(rows, kv_len)
    dec.rope_table(kv_len)
    token = torch.randint(0, min(1000, dec.model.config.vocab_size), (rows,), device=dev)
    if own_lengths:
        lengths = torch.randint(max(1, kv_len // 8), kv_len + 1, (rows,), generator=torch.Generator().manual_seed(0))
        cache.mask.copy_(torch.arange(kv_len)[None, :] < lengths[:, None])
        slot = (lengths - 1).to(dev)
        pos = slot.clone()
    else:
        lengths = torch.full((rows,), kv_len)
        cache.mask.fill_(True)
        pos = torch.full((rows,), kv_len - 1, device=dev)
        slot = torch.tensor([kv_len - 1], device=dev)
    dec.attend = partial(decode_attention, config=Plan(splits=splits)) if splits else attend

    def step():
        return dec.logits(dec.decode(cache, token, pos, slot, kv_len))

    for _ in range(3):
        step()
    _, seconds = timed(lambda: [step() for _ in range(steps)], dev)
    with profile(activities=[activity(dev)]) as prof:
        for _ in range(steps):
            step()
        sync(dev)
    per_step = sum(t for _, t, _ in kernel_rows(prof, dev)) / 1e6 / steps
    step_bytes = dec.weight_bytes() + dec.kv_bytes_per_token() * int(lengths.sum())
    bandwidth = peaks(dev)[1]
    bound = f", {step_bytes / per_step / bandwidth:.1%} of the HBM bound" if bandwidth == bandwidth else ""
    kind = "own lengths (mean {:.0f})".format(lengths.float().mean()) if own_lengths else "every row at kv_len"
    plan_name = f"{splits} KV splits" if splits else "default plan"
    del cache
    release(dev)
    return (f"decode: {rows} rows, kv_len {kv_len}, {kind}, {plan_name}, eager launch {seconds / steps * 1e3:.2f} "
            f"ms/step\n" + kernel_table(prof, top, dev=dev) +
            f"\nbytes per step {step_bytes / 1e9:.2f} GB (weights {dec.weight_bytes() / 1e9:.2f}) in "
            f"{per_step * 1e3:.2f} ms of kernels: {step_bytes / per_step / 1e12:.2f} TB/s{bound}")


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


def ints(text: str) -> list[int]:
    """A comma-separated list of integers (an argparse type)."""
    return [int(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m", choices=[m for m in [*SHAPES, *LONG_SHAPES] if m != "tiny"])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--kv-len", type=ints, default=[384], help="attended lengths, comma-separated")
    ap.add_argument("--own-lengths", action="store_true", help="the refilling generator's step (module docstring)")
    ap.add_argument("--splits", type=ints, default=[0], help="KV splits of the attention kernel (0: its plan)")
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
        args.model, args.rows, args.kv_len, args.steps, args.micro_rows = "tiny", 4, [32], 2, 4
    long = args.model not in SHAPES
    if long and not (args.skip_learner and not args.graph):
        ap.error(f"--model {args.model}: a long shape profiles the decode alone (add --skip-learner, drop --graph)")
    if any(args.splits) and not available(dev):
        ap.error("--splits: the Triton kernel runs on CUDA only")
    model = build_long_model(args.model, dev) if long else build_model(SHAPES[args.model], torch.bfloat16, args.device)
    print(f"## {args.model} on {peaks(dev)[2]}\n", flush=True)
    if not args.skip_decode:
        dec = StaticKVDecoder(model, fp32_head=False, compiled=dev.type == "cuda")
        own_attend = dec.attend
        for kv_len in args.kv_len:
            for splits in args.splits:
                print(profile_decode(dec, args.rows, kv_len, args.steps, args.top, args.own_lengths, splits,
                                     attend=own_attend) + "\n", flush=True)
    if args.graph:
        print(profile_graph_steps(args.model, CPU_WORK if args.tiny else GPU_WORK, dev, args.top) + "\n", flush=True)
    if not args.skip_learner:
        print(profile_learner(args.model, model, args.micro_rows, args.micro_batch, args.top), flush=True)


if __name__ == "__main__":
    main()
