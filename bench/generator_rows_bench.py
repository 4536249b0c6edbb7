"""The torch generator at the paper's lengths (Section 2: a 512-token prompt, 12,288 think and 2,048 answer
tokens), its rows refilled with the call's pending prompts as traces end (``engine.generator_rows``,
``rlscale.engines.generators.graph_decode.RefillBucket``) against static batches (``engine.generator_rows=0``)
on the same completion lengths: samples/s, decode steps, the decode's fraction of the HBM bound, and the peak
memory against the estimate (``rlscale.engines.memory``, what ``rlscale sweep --dry-run`` prints).

Lengths: completion j's think length is drawn lognormal (``--median`` tokens, ``--sigma``) and clipped to
[1, ``--think``]; it is the trace's think budget with interruption (Section 3.2), so the random-weight model's
trace is ended exactly there by the forced phrase (8 tokens, ``</think>`` last), then its answer runs to the
``--answer`` cap (a random-weight model draws end-of-sequence with probability about 1/V per token). The close
or end token drawn by chance (about 1/V per token too) ends a few traces early, and differently in the two
modes when their draws differ: the table gives each mode's tokens.

Modes, on one ``GraphDecoder`` per model: **refill**, one call over all prompts x generations with R rows;
**static**, calls over consecutive slices of S rows, each a static batch until its longest trace ends, which is
what a generator without refilling does with memory for S rows. R (``--rows``): a number, or ``auto``: what
``engine.generator_rows=auto`` takes on this card for a generator GPU of its own (weights and KV cache, 90 % of
the card); S: the largest batch bucket (``graph_decode.batch_bucket``) not above R, since a static batch holds
its bucket's rows. Every mode first runs a warm-up call (compilation, CUDA-graph capture of every kv_len), not
timed. HBM bound: the bytes the decode steps must read (the weights each step, and each live row's KV cache
so far) over the datasheet bandwidth and the call's seconds (prefill included). Peak:
``torch.cuda.max_memory_allocated`` over the mode (weights included) against the estimate's generator GPU
(weights and the KV cache of the mode's rows; the decoder's fused q/k/v and gate/up copies are not in it).

On CUDA: random-weight Qwen3-1.7B and 4B shapes (``long_sequence_bench.SHAPES``), bf16, compiled (``--eager``:
not), CUDA graphs. ``--memory-only`` runs each mode's warm-up call alone (its bucket allocated at full length,
its graphs captured, one call of 1-token think budgets): the peak against the estimate at the full batch, in
about a minute per model.
On CPU (``--device cpu --tiny``, tests/unit/engines/test_benches.py; seconds): a 4-layer Llama of hidden 64,
float32, 16-token prompts, 64 think and 16 answer tokens, 2 prompts x 4 generations, 3 rows, eager, no graphs.

    python bench/generator_rows_bench.py [--models qwen3-1.7b,qwen3-4b] [--prompts 8] [--generations 16]
        [--rows auto] [--think 12288] [--answer 2048] [--median 4096] [--sigma 0.75] [--max-minutes M]
        [--memory-only] [--eager] [--out FILE]
    python bench/generator_rows_bench.py --device cpu --tiny [--out FILE]
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional

import torch

from lib import record
from lib.decode import completion_bytes
from lib.shapes import peaks
from lib.workloads import BenchTokenizer
from long_sequence_bench import SHAPES, build_model
from rlscale.engines.generators.graph_decode import GraphDecoder, batch_bucket
from rlscale.engines.generators.phases import PhaseRules
from rlscale.engines.memory import GIB, JobLayout, MemoryEstimate, ModelShape, generator_rows


@dataclass(frozen=True)
class Setup:
    device: torch.device
    prompts: int
    generations: int
    prompt_tokens: int
    think: int
    answer: int
    median: float
    sigma: float
    rows: Optional[int]  # None: auto
    compiled: bool
    memory_only: bool = False


def think_lengths(setup: Setup) -> torch.Tensor:
    """Each completion's think length: lognormal, clipped to [1, think], seeded."""
    gen = torch.Generator().manual_seed(0)
    normal = torch.randn(setup.prompts * setup.generations, generator=gen, dtype=torch.float64)
    return (setup.median * torch.exp(setup.sigma * normal)).round().clamp(1, setup.think).long()


def prompts_of(setup: Setup, tok: BenchTokenizer) -> List[List[int]]:
    """``prompts`` random prompts of ordinary tokens, each repeated ``generations`` times side by side."""
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, tok.ordinary, (setup.prompt_tokens,), generator=gen).tolist()
               for _ in range(setup.prompts)]
    return [p for p in prompts for _ in range(setup.generations)]


def layout(name: str, setup: Setup, rows: int, tok: BenchTokenizer) -> JobLayout:
    """A generator GPU of its own (weights and KV cache) sampling the call's rows, ``rows`` at once."""
    bf16 = setup.device.type == "cuda"
    sequence = setup.prompt_tokens + setup.think + len(tok.interrupt_ids) + setup.answer + 1
    n = setup.prompts * setup.generations
    return JobLayout(2 if bf16 else 4, False, "torch", 2, 1, n, n, 0, sequence, 1, 1, False, 0, rows)


def auto_rows(name: str, setup: Setup, tok: BenchTokenizer) -> int:
    """``engine.generator_rows=auto`` on this card (every row: the call's), or on CPU half the call's rows."""
    n = setup.prompts * setup.generations
    if setup.device.type != "cuda":
        return max(1, n // 2)
    card = torch.cuda.get_device_properties(setup.device).total_memory
    return generator_rows(ModelShape.of_config(SHAPES[name]), layout(name, setup, None, tok), card) or n


def static_rows(rows: int) -> int:
    """The largest batch bucket not above ``rows`` (a static batch holds its bucket's rows); below the smallest
    bucket, ``rows`` (in a bucket of 8)."""
    if rows < 8:
        return rows
    return 1 << (rows.bit_length() - 1) if rows < 128 else rows // 64 * 64


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(name: str, mode: str, engine: GraphDecoder, rows: int, setup: Setup, tok: BenchTokenizer,
            prompts: List[List[int]], budgets: torch.Tensor) -> Dict[str, object]:
    """One mode: a warm-up call, then the timed call(s) over every prompt."""
    dev = setup.device
    engine.buckets.clear()
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    engine.rows = rows if mode == "refill" else 0
    calls = [(0, len(prompts))] if mode == "refill" else [(i, min(i + rows, len(prompts)))
                                                         for i in range(0, len(prompts), rows)]
    rec: Dict[str, object] = {"model": name, "mode": mode, "rows": rows}
    try:
        width = min(rows, len(prompts))
        engine.generate(prompts[:width], torch.ones(width, dtype=torch.long), 7, 0, None, str)  # warm-up
        sync(dev)
        if setup.memory_only:
            return {**rec, **memory(name, mode, rows, setup, tok)}
        start = time.perf_counter()
        completions, steps = [], 0
        for lo, hi in calls:
            out, taken = engine.generate(prompts[lo:hi], budgets[lo:hi], 11, 0, None, str)
            completions += out
            steps += taken
        sync(dev)
        seconds = time.perf_counter() - start
    except torch.OutOfMemoryError:
        rec["error"] = "out of memory"
        return rec
    _, bw_peak, _ = peaks(dev)
    dec = engine.decoder
    bound = completion_bytes(dec.weight_bytes(), dec.kv_bytes_per_token(), completions, steps) / bw_peak
    rec.update(seconds=seconds, samples_per_s=len(completions) / seconds, steps=steps,
               tokens=sum(len(c.tokens) for c in completions), hbm_fraction=bound / seconds,
               interrupted=sum(c.interrupted for c in completions),
               in_order=[c.prompt_ids for c in completions] == prompts)
    return {**rec, **memory(name, mode, rows, setup, tok)}


def memory(name: str, mode: str, rows: int, setup: Setup, tok: BenchTokenizer) -> Dict[str, float]:
    """The estimate of the mode's generator GPU (a static batch holds its bucket's rows) and, on CUDA, the
    peak since the mode began."""
    cache_rows = rows if mode == "refill" else batch_bucket(rows)
    estimate = MemoryEstimate.of(ModelShape.of_config(SHAPES[name]), layout(name, setup, cache_rows, tok))
    out = {"estimate_gib": estimate.generator_gib}
    if setup.device.type == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated(setup.device) / GIB
    return out


def run_model(name: str, setup: Setup, deadline: float, emit) -> None:
    dev = setup.device
    vocab = SHAPES[name].vocab_size
    tok = BenchTokenizer(vocab)
    rules = PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=tok.think_close_ids,
                       interrupt_ids=tok.interrupt_ids, max_answer=setup.answer, interruption=True)
    model = build_model(name, dev)
    engine = GraphDecoder(model, rules, fp32_head=False, temperature=1.0, max_budget=setup.think,
                          compiled=setup.compiled)
    prompts, budgets = prompts_of(setup, tok), think_lengths(setup)
    rows = setup.rows or auto_rows(name, setup, tok)
    for mode, mode_rows in (("refill", rows), ("static", static_rows(rows))):
        if time.monotonic() > deadline:
            emit({"model": name, "mode": mode, "rows": mode_rows, "error": "skipped: --max-minutes passed"})
            continue
        emit(measure(name, mode, engine, mode_rows, setup, tok, prompts, budgets))
    del engine, model
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def engine_text(setup: Setup) -> str:
    if setup.device.type != "cuda":
        return "eager, no graphs"
    return "compiled, CUDA graphs" if setup.compiled else "CUDA graphs of the eager step"


def table(results: List[Dict[str, object]], setup: Setup, machine: str) -> List[str]:
    n = setup.prompts * setup.generations
    lengths = think_lengths(setup).float()
    full = setup.prompt_tokens + setup.think + len(BenchTokenizer(8).interrupt_ids) + setup.answer + 1
    lines = [f"torch generator, {setup.prompts} prompts x {setup.generations} generations of {setup.prompt_tokens}-token "
             f"prompts, think budget {setup.think} + answer {setup.answer}; think lengths lognormal (median "
             f"{setup.median:g}, sigma {setup.sigma:g}) clipped to the budget: mean {lengths.mean():.0f}, max "
             f"{lengths.max():.0f}, {int((lengths >= setup.think).sum())} of {n} at the budget; each trace "
             f"interrupted at its drawn length, its answer to the cap; {machine}, "
             f"{engine_text(setup)}; commit {record.commit(['rlscale', 'bench'])}"
             + ("; memory only: the peak after the warm-up call (the buckets' caches and graphs at "
                f"{full} tokens), no timed call" if setup.memory_only else ""),
             "", "| model | mode | rows | samples/s | s | decode steps | tokens | HBM bound | peak GiB | estimate GiB |"
             " in prompt order |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_model: Dict[str, Dict[str, Dict[str, object]]] = {}
    for rec in results:
        by_model.setdefault(str(rec["model"]), {})[str(rec["mode"])] = rec
        peak = f"{rec['peak_gib']:.3g}" if "peak_gib" in rec else "n/a"
        if "error" in rec or setup.memory_only:
            memory_cells = "" if "error" in rec else f" {peak} | {rec['estimate_gib']:.3g} |"
            lines.append(f"| {rec['model']} | {rec['mode']} | {rec['rows']} | {rec.get('error', 'memory only')} "
                         f"| | | | |{memory_cells or ' | |'} |")
            continue
        lines.append(f"| {rec['model']} | {rec['mode']} | {rec['rows']} | {rec['samples_per_s']:.3g} | "
                     f"{rec['seconds']:.3g} | {rec['steps']} | {rec['tokens']} | {rec['hbm_fraction']:.1%} | {peak} | "
                     f"{rec['estimate_gib']:.3g} | {rec['in_order']} |")
    ratios = [f"{name}: {modes['refill']['samples_per_s'] / modes['static']['samples_per_s']:.2f}x"
              for name, modes in by_model.items()
              if all("samples_per_s" in modes.get(m, {}) for m in ("refill", "static"))]
    return lines + ["", "refill / static samples/s: " + ("; ".join(ratios) or "n/a")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the CPU smoke shape and lengths (module docstring)")
    parser.add_argument("--models", default="qwen3-1.7b,qwen3-4b")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=16)
    parser.add_argument("--rows", default="auto", help="refilled rows: a number or auto")
    parser.add_argument("--think", type=int, default=12288)
    parser.add_argument("--answer", type=int, default=2048)
    parser.add_argument("--median", type=float, default=4096.0, help="median think length (tokens)")
    parser.add_argument("--sigma", type=float, default=0.75, help="sigma of the log think length")
    parser.add_argument("--max-minutes", type=float, default=math.inf, help="start no measurement after this")
    parser.add_argument("--memory-only", action="store_true", help="each mode's warm-up call only (its bucket at "
                                                                  "full length): peak memory against the estimate")
    parser.add_argument("--eager", action="store_true", help="on CUDA, graphs of the eager step (no torch.compile)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (markdown), and the "
                                                                "numbers beside it (.json)")
    args = parser.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cpu":
        torch.set_num_threads(1)  # tiny matrices: threads only contend
    rows = None if args.rows == "auto" else int(args.rows)
    setup = Setup(dev, args.prompts, args.generations, 512, args.think, args.answer, args.median, args.sigma, rows,
                  dev.type == "cuda" and not args.eager, args.memory_only)
    models = args.models.split(",")
    if args.tiny:
        setup, models = replace(setup, prompts=2, generations=4, prompt_tokens=16, think=64, answer=16, median=24.0,
                                sigma=0.6, rows=rows or 3), ["tiny"]
    machine = torch.cuda.get_device_name(dev) if dev.type == "cuda" else record.cpu_model()
    deadline = time.monotonic() + 60 * args.max_minutes
    results: List[Dict[str, object]] = []

    def emit(rec: Dict[str, object]) -> None:
        results.append(rec)
        print(json.dumps(rec), flush=True)
        if args.out is not None:  # measurement by measurement: a run stopped at its limit keeps what finished
            args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))

    for name in models:
        run_model(name, setup, deadline, emit)
    record.publish(table(results, setup, machine), args.out)


if __name__ == "__main__":
    main()
