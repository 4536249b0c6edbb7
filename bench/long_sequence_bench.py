"""The torch learner on the paper's sequence length (Section 2: a 512-token prompt, 12,288 think tokens, the
16-token interruption phrase and 2,048 answer tokens: 14,865 tokens), one row per update, with activation
checkpointing (``engine.activation_checkpointing``) and the LM head in chunks of positions
(``rlscale.engines.models.policy.chunked_head_logprobs``) off and on: the peak memory of an update, the memory
estimate's learner parts for it (``rlscale.engines.memory``: weights, optimizer, activations, LM head) and the
step time, ending in the ratio of both on to both off.

On CUDA: random-weight Qwen3 shapes (their published sizes: 1.7B, 28 layers; 4B, 36 layers; 152k vocabulary,
tied head), bf16 weights with float32 masters, the FP32 head (Section 3.2), the learner compiled as a run
compiles it (``--eager``: not), peaks from ``torch.cuda.max_memory_allocated``; a variant that does not fit says
"out of memory". On CPU (``--quick``, tests/unit/engines/test_benches.py; seconds): a 4-layer Llama of hidden 64
and a 8,192 vocabulary on 1,024 tokens with chunks of 128, float32, peaks from torch's CPU allocations
(``rlscale.testing.cpu_memory``), eager.

    python bench/long_sequence_bench.py [--models qwen3-1.7b,qwen3-4b] [--tokens 14865] [--eager] [--out FILE]
    python bench/long_sequence_bench.py --quick [--out FILE]
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from lib import record
from rlscale.config.schema import BatchConfig, OptimConfig, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.core.types import TrainBatch
from rlscale.engines.learners.build import build_learner
from rlscale.train.components import learner_settings_of
from rlscale.engines.memory import GIB, HEAD_CHUNK_TOKENS, JobLayout, MemoryEstimate, ModelShape
from rlscale.testing.cpu_memory import peak_cpu_bytes

PAPER_TOKENS = 512 + 12288 + 16 + 2048 + 1  # prompt, think budget, phrase, answer budget, end of sequence
PROMPT = 512
QWEN3 = dict(vocab_size=151936, num_key_value_heads=8, head_dim=128, rope_theta=1e6, tie_word_embeddings=True,
             max_position_embeddings=40960)
SHAPES = {"qwen3-1.7b": Qwen3Config(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                                    num_attention_heads=16, **QWEN3),
          "qwen3-4b": Qwen3Config(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                                  num_attention_heads=32, **QWEN3),
          "tiny": LlamaConfig(vocab_size=8192, hidden_size=64, intermediate_size=256, num_hidden_layers=4,
                              num_attention_heads=4, max_position_embeddings=1024, tie_word_embeddings=False)}
VARIANTS = [(False, 0), (False, None), (True, 0), (True, None)]  # (checkpointing, head chunk; None: the default)


@dataclass(frozen=True)
class Setup:
    device: torch.device
    tokens: int
    chunk: int
    compiled: bool


def batch_of(tokens: int, vocab: int, device: torch.device) -> tuple:
    """One row of ``tokens`` random ids, the loss on everything after the prompt, generator log-probs of a
    uniform policy (a random-weight model's are close to it), advantage 1, weights summing to 1."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, tokens), generator=gen)
    mask = torch.zeros(1, tokens - 1)
    mask[0, min(PROMPT, tokens // 2) - 1:] = 1.0
    gen_logp = torch.full((1, tokens - 1), -float(torch.log(torch.tensor(float(vocab))))) * mask
    batch = TrainBatch(ids, torch.ones_like(ids), gen_logp, mask, torch.zeros_like(ids[:, 1:]), torch.ones(1),
                       torch.zeros(1, dtype=torch.long))
    return batch, torch.ones(1), mask / mask.sum()


def build_model(name: str, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    config = SHAPES[name]
    with torch.device(device):
        model = (Qwen3ForCausalLM if isinstance(config, Qwen3Config) else LlamaForCausalLM)(config)
    return model.to(torch.bfloat16 if device.type == "cuda" else torch.float32).eval()


def estimate_gib(name: str, setup: Setup, checkpointing: bool, chunk: int) -> float:
    """The memory estimate's learner parts (no generator) for one row of ``setup.tokens``."""
    bf16 = setup.device.type == "cuda"
    layout = JobLayout(2 if bf16 else 4, True, "torch", 2, 1, 1, 1, 1, setup.tokens, 0, 0, checkpointing, chunk)
    parts = MemoryEstimate.of(ModelShape.of_config(SHAPES[name]), layout).trainer
    return sum(parts[k] for k in ("weights", "optimizer", "activations", "lm_head")) / GIB


def measure(name: str, setup: Setup, checkpointing: bool, chunk: int) -> Dict[str, object]:
    """Peak bytes and seconds of an update after a first one (compilation, the optimizer's moments)."""
    dev = setup.device
    cfg = RunConfig(model=TinyModelConfig(dtype="bfloat16" if dev.type == "cuda" else "float32"),
                    optim=OptimConfig(lr=1e-6), batch=BatchConfig(micro_batch=1))
    model = build_model(name, dev)
    settings = learner_settings_of(cfg, compiled=setup.compiled, max_width=setup.tokens if setup.compiled else 0,
                                   checkpointing=checkpointing)
    learner = build_learner(replace(settings, head_chunk=chunk), model)
    batch, advantages, weights = batch_of(setup.tokens, SHAPES[name].vocab_size, dev)
    rec: Dict[str, object] = {"estimate_gib": estimate_gib(name, setup, checkpointing, chunk)}
    try:
        learner.step(batch, advantages, weights)
        seconds = []
        for _ in range(2):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            start = time.perf_counter()
            learner.step(batch, advantages, weights)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            seconds.append(time.perf_counter() - start)
        rec["step_s"] = min(seconds)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
            learner.step(batch, advantages, weights)
            rec["peak_gib"] = torch.cuda.max_memory_allocated(dev) / GIB
        else:  # the profiler slows the update it measures: its own update
            rec["peak_gib"] = peak_cpu_bytes(lambda: learner.step(batch, advantages, weights))[1] / GIB
    except torch.OutOfMemoryError:
        rec["error"] = "out of memory"
    del learner, model
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return rec


def table(results: Dict[str, List[Dict[str, object]]], setup: Setup, machine: str) -> List[str]:
    lines = [f"torch learner, one row of {setup.tokens} tokens, FP32 head, {machine}; "
             f"{'compiled' if setup.compiled else 'eager'}; commit {record.commit(['rlscale', 'bench'])}", "",
             "| model | activation checkpointing | head chunk | peak GiB | estimate GiB | update s |",
             "|---|---|---|---|---|---|"]
    ratios = []
    for name, recs in results.items():
        for rec in recs:
            chunk = f"{rec['chunk']} positions" if rec["chunk"] else "whole"
            measured = [rec.get("error", f"{rec.get('peak_gib', 0):.3g}"), f"{rec['estimate_gib']:.3g}",
                        "" if "error" in rec else f"{rec['step_s']:.3g}"]
            lines.append(f"| {name} | {'on' if rec['checkpointing'] else 'off'} | {chunk} | " + " | ".join(measured)
                         + " |")
        off, on = recs[0], recs[-1]
        if "error" in on:
            ratios.append(f"{name}: does not fit with both")
        elif "error" in off:
            ratios.append(f"{name}: fits only with both ({on['peak_gib']:.3g} GiB)")
        else:
            ratios.append(f"{name}: peak memory {on['peak_gib'] / off['peak_gib']:.2f}x, update time "
                          f"{on['step_s'] / off['step_s']:.2f}x")
    return lines + ["", "checkpointing and chunks on / both off: " + "; ".join(ratios)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="CPU smoke run of a few seconds (module docstring)")
    parser.add_argument("--models", default="qwen3-1.7b,qwen3-4b")
    parser.add_argument("--tokens", type=int, default=PAPER_TOKENS)
    parser.add_argument("--chunk", type=int, default=HEAD_CHUNK_TOKENS, help="positions per pass of the head")
    parser.add_argument("--eager", action="store_true", help="on CUDA, do not compile the learner")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (markdown), and the "
                                                                "numbers beside it (.json)")
    args = parser.parse_args()
    if args.quick:
        setup, models, machine = Setup(torch.device("cpu"), 1024, 128, False), ["tiny"], record.cpu_model()
    else:
        dev = torch.device("cuda")
        setup, models = Setup(dev, args.tokens, args.chunk, not args.eager), args.models.split(",")
        machine = torch.cuda.get_device_name(dev)
    results: Dict[str, List[Dict[str, object]]] = {}
    for name in models:
        for checkpointing, chunk in VARIANTS:
            chunk = setup.chunk if chunk is None else chunk
            rec = {"checkpointing": checkpointing, "chunk": chunk, **measure(name, setup, checkpointing, chunk)}
            results.setdefault(name, []).append(rec)
            print(json.dumps({"model": name, **rec}), flush=True)
            if args.out is not None:  # variant by variant: a run stopped at its limit keeps what finished
                args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    record.publish(table(results, setup, machine), args.out)


if __name__ == "__main__":
    main()
