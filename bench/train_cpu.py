"""CPU cost of the embedded default: generation and training tokens/s of the tiny model, and the CPU
seconds (the process and all its descendants, the PipelineRL generators included), wall time, rise and
Eq. 1 fit (on the analytic FLOPs axis) of one default run (``rlscale run`` with no override: the ScaleRL
recipe, PipelineRL, 60 updates, 11 evals) against the synchronous on-policy loop (``offpolicy=ppo
offpolicy.batches_per_version=1``), measured in the same invocation.

    python bench/train_cpu.py [--threads 1] [--batches 5]
    python bench/train_cpu.py --quick    # seconds: 1 batch, runs of 2 updates, evaluated at both ends (no fit)

CPU seconds, not wall time, plan a sweep on a shared machine: ``rlscale sweep conf=loo`` runs its runs in
one lane per core, so its wall time on idle cores is about the sum of the runs' CPU seconds / cores.
The first run on a machine also builds the cached warm-up model; run the bench twice to see a run alone."""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlscale.config import compose_run_config, typed
from rlscale.fit.api import fit_results
from rlscale.fit.results import FitSettings
from rlscale.train.loop import RunLoop, prepare_batch


def measure(threads: int, batches: int) -> dict:
    cfg = typed(compose_run_config(["offpolicy=ppo", "offpolicy.batches_per_version=1", f"engine.threads={threads}"]))
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


def reap_descendants() -> None:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER) so their CPU time reaches RUSAGE_CHILDREN."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def children_cpu_seconds() -> float:
    while True:  # wait for adopted orphans, so that their time is counted
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


QUICK = ["trainer.max_steps=2", "trainer.eval_every=2"]  # --quick's runs: 2 evals, too few for Eq. 1


def timed_run(overrides: list[str]) -> dict:
    """CPU and wall seconds of one ``rlscale run`` in a fresh process, its R0, final reward and Eq. 1 fit."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cpu0, start = children_cpu_seconds(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "rlscale.cli", "run", f"out={run_dir}", *overrides], check=True,
                       capture_output=True)
        cpu, wall = children_cpu_seconds() - cpu0, time.perf_counter() - start
        lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        curve = [r["val_reward"] for r in lines if r["kind"] == "eval"]
        fit = fit_results(run_dir, FitSettings(x="flops", n_boot=0)).runs[0]
    return {"cpu": cpu, "wall": wall, "r0": curve[0], "final": curve[-1], "r2": fit.r2 or float("nan"),
            "A": fit.A}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the throughput rows")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 batch and short runs (seconds; the fit is nan)")
    args = ap.parse_args()
    runs = QUICK if args.quick else []
    torch.set_num_threads(args.threads)
    reap_descendants()
    m = measure(args.threads, 1 if args.quick else args.batches)
    default = timed_run(runs)
    sync = timed_run(["offpolicy=ppo", "offpolicy.batches_per_version=1", *runs])
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'metric':<52}{'value':>12}")
    print(f"{f'generation tokens/s (prompt+completion, {args.threads} thr)':<52}{m['gen_tok_s']:>12.0f}")
    print(f"{f'training tokens/s (fwd+bwd, {args.threads} thr)':<52}{m['train_tok_s']:>12.0f}")
    for name, r in (("default run (ScaleRL, PipelineRL-2)", default), ("baseline: synchronous run (PPO-1)", sync)):
        print(f"{name + ' CPU s (all processes)':<52}{r['cpu']:>12.1f}")
        print(f"{name + ' wall s':<52}{r['wall']:>12.1f}")
        print(f"{name + ' R0 -> final':<52}{r['r0']:>5.3f} {r['final']:>6.3f}")
        print(f"{name + ' Eq. 1 R^2, A':<52}{r['r2']:>5.3f} {r['A'] or float('nan'):>6.3f}")
    print(f"{'ratio default / synchronous wall':<52}{default['wall'] / sync['wall']:>12.2f}")


if __name__ == "__main__":
    main()
