"""gpu_bench's ``long`` section: the ScaleRL step (Section 4: FP32 head, CISPO, PipelineRL-8) at the paper's lengths
(Section 2: 512-token prompts, 12,288 think and 2,048 answer tokens), 8 prompts x 16 generations, on one GPU.

The run's own parts (``rlscale.train.components.assemble_components``) around a random-weight Qwen3 shape
(``long_sequence_bench.SHAPES``) and the bench task: one PipelineRL generator process beside the trainer on the
same GPU, immediate in-flight updates (``offpolicy.update_every_tokens=0``: one published copy of the weights),
``engine.generator_rows=auto`` (rows refilled as traces end) and ``engine.activation_checkpointing=auto``
resolved on the card, micro-batches of one row.

Lengths: random weights end no trace by themselves (the close and end tokens come with probability about 1/V), so
each trace's think budget is drawn lognormal (``LognormalInterruption``: median 4,096 tokens, sigma 0.75, clipped
to [1, 12,288]; a stand-in for the long tail of real reasoning traces), the interruption of Section 3.2 ends it
there and its answer runs to the 2,048-token cap.

Per shape: the estimate of the trainer GPU (``rlscale.engines.memory``, what ``rlscale sweep --dry-run`` prints;
the generator shares that GPU) against the peak the GPU held (``torch.cuda.mem_get_info`` every 0.1 s: both
processes, their CUDA contexts and allocator caches; a progress line every 30 s gives the generator's decode
steps so far) and the trainer process's ``max_memory_allocated``; for each
step its seconds, the trainer's wait for the batch (the generation, first step: compilation included, given
apart), the update's seconds and MFU (6 x params x trained tokens over the card's bf16 peak; recomputation by
checkpointing not counted), samples/s; the generation's fraction of the HBM bound over the first step's wait less
compilation (bytes: the weights at every decode step of the refill schedule the lengths give, plus each
completion's KV cache read at each of its steps).

On CPU (``--device cpu --tiny``; tests/unit/engines/test_benches.py): the tiny Llama, 2 prompts x 4 generations,
16-token prompts, 64 think and 16 answer tokens, median 24; no memory figures.
"""
from __future__ import annotations

import gc
import heapq
import math
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Dict, List

import torch

from lib.decode import completion_bytes
from lib.shapes import peaks
from lib.step import components
from lib.workloads import BenchTokenizer, Workload
from long_sequence_bench import SHAPES, build_model
from rlscale.config.schema import RunConfig
from rlscale.engines.compile_cost import STALLS
from rlscale.engines.generators.graph_decode import CHECK_EVERY
from rlscale.engines.memory import GIB, JobLayout, MemoryEstimate, ModelShape
from rlscale.engines.models.policy import count_parameters
from rlscale.rl.curriculum import CurriculumConfig
from rlscale.rl.length import InterruptionConfig
from rlscale.rl.losses import CispoConfig
from rlscale.train.components import auto_checkpointing, resolved_generator_rows
from rlscale.train.loop import prepare_batch
from rlscale.train.offpolicy.configs import PipelineConfig

PAPER_LENGTHS = Workload(prompts=8, generations=16, prompt_len=512, think=12288, answer=2048, pool=64)
TINY_LENGTHS = Workload(prompts=2, generations=4, prompt_len=16, think=64, answer=16, pool=16)
MEDIAN, SIGMA = 4096.0, 0.75
TINY_MEDIAN = 24.0


@dataclass
class LognormalInterruption(InterruptionConfig):
    """Interruption (Sec. 3.2) at a think length drawn lognormal(log ``median``, ``sigma``) and clipped to the
    window, instead of uniformly: the length spread a random-weight model cannot produce (benchmarks only)."""

    median: float = MEDIAN
    sigma: float = SIGMA

    def think_budgets(self, n: int, max_think_tokens: int, rng: torch.Generator) -> torch.Tensor:
        normal = torch.randn(n, generator=rng, dtype=torch.float64)
        return (self.median * torch.exp(self.sigma * normal)).round().clamp(*self.window).long()


def step_config(work: Workload, device: str, median: float) -> RunConfig:
    """The ScaleRL recipe's step at ``work``'s batch and lengths on one GPU (module docstring)."""
    cfg = RunConfig()
    cfg.engine.device = device
    cfg.model.dtype = "bfloat16" if device == "cuda" else "float32"
    cfg.generation.max_think_tokens, cfg.generation.max_answer_tokens = work.think, work.answer
    cfg.length = LognormalInterruption(window=[1, work.think], median=median)
    cfg.precision.lm_head_fp32, cfg.precision.name = True, "fp32_head"
    cfg.loss = CispoConfig()
    cfg.batch.prompts, cfg.batch.generations, cfg.batch.micro_batch = work.prompts, work.generations, 1
    cfg.offpolicy = PipelineConfig(max_lag=8, num_generators=1, update_every_tokens=0)
    cfg.curriculum = CurriculumConfig(name="uniform")
    cfg.optim.lr = 1e-6
    cfg.engine.generator_rows = cfg.engine.activation_checkpointing = "auto"
    return cfg


class Watch:
    """While the block runs: the most memory the device held (all processes), sampled every ``every`` seconds,
    and a progress line every ``report_every`` seconds (elapsed time, the device's memory and ``progress()``),
    since a batch at the paper's lengths takes minutes before its step ends."""

    def __init__(self, device: torch.device, label: str, every: float = 0.1, report_every: float = 30.0):
        self.device, self.label, self.every, self.report_every = device, label, every, report_every
        self.peak = 0
        self.progress = lambda: ""
        self.stop = threading.Event()

    def _watch(self) -> None:
        start = last = time.monotonic()
        while not self.stop.wait(self.every):
            used = 0
            if self.device.type == "cuda":
                free, total = torch.cuda.mem_get_info(self.device)
                used = total - free
                self.peak = max(self.peak, used)
            if time.monotonic() - last >= self.report_every:
                last = time.monotonic()
                print(f"[{self.label}] {last - start:.0f} s: device {used / GIB:.1f} GiB; {self.progress()}",
                      flush=True)

    def __enter__(self) -> "Watch":
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def progress(status, records: list, last: dict) -> str:
    """The progress line's text: RL steps done, the generator's decode steps so far and their rate since the last
    line, chunks finished."""
    now, steps = time.monotonic(), status.decode_steps()
    rate = (steps - last["steps"]) / max(now - last["at"], 1e-9)
    last.update(at=now, steps=steps)
    return (f"step {len(records)}, generator decode steps {steps} ({rate:.1f}/s), "
            f"chunks {status.chunks_finished()}")


def refill_steps(lengths: List[int], rows: int) -> int:
    """Decode steps of ``lengths`` completions dealt in order to ``rows`` refilled rows, a row taking its next
    completion at the first done-check (every ``CHECK_EVERY`` steps) after its trace ends."""
    free = [0] * rows
    for n in lengths:
        start = heapq.heappop(free)
        heapq.heappush(free, -(-(start + n) // CHECK_EVERY) * CHECK_EVERY)
    return max(free)


def decode_bytes(model: torch.nn.Module, completions, rows: int) -> float:
    """Bytes the generation must read: the weights at every decode step of the refill schedule, and each
    completion's KV cache so far at each of its steps."""
    cfg = model.config
    kv_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 2  # bf16 keys and values
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return completion_bytes(weights, kv_token, completions, refill_steps([len(c.tokens) for c in completions], rows))


def timed_step(c, step: int, dev: torch.device) -> Dict[str, float]:
    """One ``RunLoop.update`` (``lib.step.rl_step``) with its parts timed."""
    compiled = STALLS.seconds
    start = time.perf_counter()
    groups = c.source.next_batch(step)
    waited = time.perf_counter() - start
    batch, advantages, weights, _ = prepare_batch(groups, c)
    update_start = time.perf_counter()
    result = c.learner.step(batch, advantages, weights)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    update = time.perf_counter() - update_start
    c.source.after_update(c.model, step + 1)
    completions = [x for g in groups for x in g.completions]
    return {"seconds": time.perf_counter() - start, "wait_s": waited, "update_s": update,
            "compile_s": STALLS.seconds - compiled, "samples": len(completions),
            "tokens": sum(len(x.tokens) for x in completions), "trained_tokens": result.trained_tokens,
            "interrupted": sum(x.interrupted for x in completions), "completions": completions}


def measure(name: str, device: str, steps: int, out: dict) -> None:
    """The section for one shape of ``long_sequence_bench.SHAPES`` (``tiny`` on CPU), into ``out['long']``."""
    dev = torch.device(device)
    work, median = (PAPER_LENGTHS, MEDIAN) if dev.type == "cuda" else (TINY_LENGTHS, TINY_MEDIAN)
    cfg = step_config(work, device, median)
    model = build_model(name, dev)
    tok = BenchTokenizer(model.config.vocab_size)
    flops_peak, bw_peak, card = peaks(dev)
    rec: Dict[str, object] = {"card": card, "work": work.__dict__, "median": median, "sigma": SIGMA,
                              "params": count_parameters(model)}
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    with tempfile.TemporaryDirectory() as tmp, Watch(dev, f"long {name}") as held:
        c = components(cfg, model, work, Path(tmp))
        status, records = c.source.workers.status, []
        held.progress = partial(progress, status, records, {"at": time.monotonic(), "steps": 0})
        checkpointing = auto_checkpointing(cfg, model, work.prompt_len, dev)
        rows = resolved_generator_rows(cfg, c.task, tok, model, dev)
        layout = replace(JobLayout.of(cfg, work.prompt_len), checkpointing=checkpointing, generator_rows=rows)
        estimate = MemoryEstimate.of(ModelShape.of_config(model.config), layout)
        rec.update(checkpointing=checkpointing, generator_rows=rows or layout.chunk_rows,
                   estimate_gib=estimate.trainer_gib, estimate_parts={k: v / GIB for k, v in estimate.trainer.items()})
        try:
            for step in range(steps):
                records.append(timed_step(c, step, dev))
        except torch.OutOfMemoryError as err:
            rec["error"] = f"out of memory at step {len(records)}: {str(err).splitlines()[0][:200]}"
        finally:
            c.source.close()
    if records:
        first = records[0]
        generation = first["wait_s"] - first["compile_s"]
        need = decode_bytes(model, first.pop("completions"), rec["generator_rows"])
        rec["hbm_fraction"] = need / bw_peak / generation
        for r in records[1:]:
            r.pop("completions")
        for r in records:
            r["samples_per_s"] = r["samples"] / (r["seconds"] - r["compile_s"])
            r["mfu"] = 6.0 * rec["params"] * r["trained_tokens"] / r["update_s"] / flops_peak
        rec["steps"] = records
    if dev.type == "cuda":
        rec.update(device_peak_gib=held.peak / GIB, trainer_allocated_gib=torch.cuda.max_memory_allocated(dev) / GIB)
    del c, model
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    out.setdefault("long", {})[name] = rec


def fmt(value, spec: str) -> str:
    """``value`` in ``spec``, or n/a for a figure that was not measured (None, NaN: no peaks on CPU)."""
    return format(value, spec) if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"


def table(long: Dict[str, dict]) -> List[str]:
    """The section's markdown: one line per shape and step, then the memory against the estimate."""
    if not long:
        return []
    work = next(iter(long.values()))["work"]
    lines = ["", f"ScaleRL step at the paper's lengths: {work['prompts']} prompts x {work['generations']} "
             f"generations, {work['prompt_len']}-token prompts, think {work['think']} + answer {work['answer']}, "
             f"think lengths lognormal (median {next(iter(long.values()))['median']:g}, sigma {SIGMA:g}) clipped to "
             "the budget; FP32 head, CISPO, PipelineRL-8 with one generator process on the trainer's GPU",
             "", "| shape | checkpointing | generator rows | step | s | compile s | wait s | update s | samples/s | "
             "tokens | interrupted | MFU |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rec in long.items():
        for i, r in enumerate(rec.get("steps", [])):
            lines.append(f"| {name} | {'on' if rec['checkpointing'] else 'off'} | {rec['generator_rows']} | {i} | "
                         f"{r['seconds']:.4g} | {r['compile_s']:.3g} | {r['wait_s']:.4g} | {r['update_s']:.4g} | "
                         f"{r['samples_per_s']:.3g} | {r['tokens']} | {r['interrupted']} | {fmt(r['mfu'], '.1%')} |")
        if "error" in rec:
            lines.append(f"| {name} | | | {rec['error']} | | | | | | | | |")
    lines += ["", "| shape | estimate GiB (trainer GPU) | device peak GiB | peak / estimate | trainer allocated GiB | "
              "generation / HBM bound |", "|---|---|---|---|---|---|"]
    for name, rec in long.items():
        peak = rec.get("device_peak_gib")
        ratio = peak / rec["estimate_gib"] if isinstance(peak, float) else None
        lines.append(f"| {name} | {rec['estimate_gib']:.4g} | {fmt(peak, '.4g')} | {fmt(ratio, '.3f')} | "
                     f"{fmt(rec.get('trainer_allocated_gib'), '.4g')} | {fmt(rec.get('hbm_fraction'), '.1%')} |")
    parts = "; ".join(f"{name}: " + ", ".join(f"{k} {v:.3g}" for k, v in rec["estimate_parts"].items())
                      for name, rec in long.items())
    return lines + ["", f"estimate parts (GiB): {parts}"]
