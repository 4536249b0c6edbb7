"""Compilation of the torch learner on a GPU over a run whose batch widths wander (rlscale.engines.compile_cost).

    python bench/learner_compile_bench.py --cache-dir DIR [--max-width 98] [--widths 98,96,80,...]
    python bench/learner_compile_bench.py --cache-dir DIR --device cpu --tiny    # CPU: 2 layers of width 64, 3 updates

A SmolLM2-135M-shaped Llama (random weights, bf16, FP32 head) updates on batches of ``--rows`` sequences
whose widths follow ``--widths`` (the default mimics a run whose responses shrink from 48 to ~10 tokens
after a 45-token prompt, then one long batch). Prints one line per update: width, padded width, seconds,
seconds compiling. Run it twice with the same ``--cache-dir``: the second process shows the cost of a
start with a warm compile cache. ``--max-width 0`` uses the dynamic-length graph instead of one shape.
``--whole`` compiles the whole log-prob pass as one graph (the learner compiles by regions: each decoder layer
and the head's pass), the baseline of the last line: Dynamo compilations, first update, median later update.

``--tiny`` takes ``bench/lib/shapes.py``'s tiny shape (2 layers, hidden 64, vocabulary 512) and, unless given,
4 rows, 4-token prompts, widths 12,10,14 and ``--max-width 16``: on the CPU the same learner and regions compile
(inductor's C++ backend instead of Triton), so the lines and their counts are checked, not the GPU's seconds.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lib.shapes import SHAPES
from rlscale.config.schema import OptimConfig, RunConfig
from rlscale.core.types import TrainBatch
from rlscale.engines.compile_cost import STALLS, use_persistent_cache
from rlscale.train.components import learner_settings_of
from rlscale.engines.learners.torch_learner import TorchLearner
from rlscale.engines.models.policy import token_logprobs

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
               tie_word_embeddings=True)
TINY = SHAPES["tiny"]
TINY_LLAMA = dict(vocab_size=TINY.vocab, hidden_size=TINY.hidden, intermediate_size=TINY.intermediate,
                  num_hidden_layers=TINY.layers, num_attention_heads=TINY.heads, num_key_value_heads=TINY.kv_heads,
                  max_position_embeddings=512, rope_theta=TINY.rope_theta, tie_word_embeddings=True)
TINY_RUN = dict(rows=4, prompt=4, widths="12,10,14", max_width=16)  # --tiny's defaults


def batch(rows: int, width: int, prompt: int, vocab: int, gen: torch.Generator) -> TrainBatch:
    """Rows of random tokens, the longest ``width`` long, completions after ``prompt`` tokens."""
    lengths = torch.randint(prompt + 2, width + 1, (rows,), generator=gen)
    lengths[0] = width
    ids = torch.zeros((rows, width), dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    mask = torch.zeros((rows, width - 1))
    for row, length in enumerate(lengths.tolist()):
        ids[row, :length] = torch.randint(3, vocab, (length,), generator=gen)
        attention[row, :length] = 1
        mask[row, prompt - 1:length - 1] = 1.0
    gen_logp = -10.0 * mask
    rewards = torch.where(torch.rand(rows, generator=gen) < 0.5, 1.0, -1.0)
    return TrainBatch(ids, attention, gen_logp, mask, torch.zeros_like(ids[:, 1:]), rewards,
                      torch.arange(rows) // 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--max-width", type=int)
    parser.add_argument("--rows", type=int)
    parser.add_argument("--prompt", type=int)
    parser.add_argument("--widths")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--whole", action="store_true", help="one graph for the whole log-prob pass")
    parser.add_argument("--tiny", action="store_true", help="the tiny shape and a short run (CPU)")
    args = parser.parse_args()
    defaults = TINY_RUN if args.tiny else dict(rows=128, prompt=45, widths="93,93,90,85,80,75,70,66,64,60,58,56,93",
                                                max_width=98)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    base = TINY_LLAMA if args.tiny else SMOLLM2
    start = time.perf_counter()
    use_persistent_cache(args.cache_dir)
    STALLS.hook_compiler()
    torch.manual_seed(0)
    shape = {**base, "num_hidden_layers": args.layers or base["num_hidden_layers"]}
    model = LlamaForCausalLM(LlamaConfig(**shape)).to(args.device, torch.bfloat16).eval()
    settings = learner_settings_of(RunConfig(optim=OptimConfig(lr=5e-6)), compiled=True, max_width=args.max_width)
    learner = TorchLearner(settings, model)
    if args.whole:
        learner.logprobs = torch.compile(token_logprobs)
    from torch._dynamo.callback import callback_handler

    compilations: list = []
    callback_handler.register_start_callback(compilations.append)
    seconds = []
    print(f"model ready after {time.perf_counter() - start:.1f} s")
    gen = torch.Generator().manual_seed(1)
    for step, width in enumerate(int(w) for w in args.widths.split(",")):
        b = batch(args.rows, width, args.prompt, shape["vocab_size"], gen)
        stalled, t0 = STALLS.seconds, time.perf_counter()
        advantages = b.rewards - b.rewards.mean()
        result = learner.step(b, advantages, b.mask / b.mask.sum())
        if args.device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t0)
        print(f"step {step + 1}: width {width} -> {learner.padded_width(width)}, {time.perf_counter() - t0:.3f} s, "
              f"compiling {STALLS.seconds - stalled:.1f} s, loss {result.loss:.4f}, "
              f"{time.perf_counter() - start:.1f} s since start", flush=True)
    print(f"{'whole' if args.whole else 'regions'}: {len(compilations)} Dynamo compilations, first update "
          f"{seconds[0]:.2f} s, median later update {statistics.median(seconds[1:]):.4f} s")


if __name__ == "__main__":
    main()
