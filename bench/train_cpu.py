"""CPU throughput of the embedded default: generation and training tokens/s of the tiny model, and the
wall time of one default run (``rlscale run`` with the ScaleRL recipe's defaults in PPO mode).

    python bench/train_cpu.py [--threads 1] [--steps 60]

Prints a table; the last row is the ratio of training to generation throughput measured in this run
(the baseline is the generator, measured in the same process)."""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlscale.config import compose_run_config
from rlscale.train.loop import RunLoop, prepare_batch


def measure(threads: int, batches: int) -> dict:
    cfg = compose_run_config(["offpolicy=ppo", "offpolicy.k=1", f"engine.threads={threads}"])
    with tempfile.TemporaryDirectory() as tmp:
        loop = RunLoop(cfg, Path(tmp))
        c = loop.comps
        loop.update()  # warm caches
        gen_tokens = gen_s = train_tokens = train_s = 0.0
        for _ in range(batches):
            t0 = time.perf_counter()
            groups = c.sampler.sample(cfg.batch.prompts, loop.step)
            t1 = time.perf_counter()
            batch, adv, weights, _ = prepare_batch(groups, c)
            result = c.learner.step(batch, adv, weights)
            t2 = time.perf_counter()
            gen_tokens += sum(len(x.tokens) + len(x.prompt_ids) for g in groups for x in g.completions)
            gen_s += t1 - t0
            train_tokens += result.trained_tokens
            train_s += t2 - t1
    return {"gen_tok_s": gen_tokens / gen_s, "train_tok_s": train_tokens / train_s}


def default_run_seconds(threads: int, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rlscale.cli", "run", f"out={tmp}/run", f"engine.threads={threads}",
                        f"trainer.max_steps={steps}", "offpolicy=ppo", "offpolicy.k=1"], check=True,
                       capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m = measure(args.threads, args.batches)
    wall = default_run_seconds(args.threads, args.steps)
    print(f"{'metric':<40}{'value':>14}")
    print(f"{'generation tokens/s (prompt+completion)':<40}{m['gen_tok_s']:>14.0f}")
    print(f"{'training tokens/s (fwd+bwd)':<40}{m['train_tok_s']:>14.0f}")
    print(f"{f'default run wall s ({args.steps} steps, incl. evals)':<40}{wall:>14.1f}")
    print(f"{'ratio train/generation tokens/s':<40}{m['train_tok_s'] / m['gen_tok_s']:>14.2f}")


if __name__ == "__main__":
    main()
