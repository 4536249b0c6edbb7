"""Benchmark of the off-policy algorithms (Section 3.1): synchronous (PPO-off-policy-1),
PPO-off-policy-k and PipelineRL-k at the same batch on the embedded default (tiny model, chain_sum).

    python bench/offpolicy_bench.py [--steps 24] [--skip 8] [--k 8] [--threads 0] [--generators 1] [--repeats 1]
    python bench/offpolicy_bench.py --steps 2 --skip 1 --k 2    # seconds: each mode's plumbing, not its throughput

Each mode is a real run (``rlscale.train.loop.train``) without evaluations or checkpoints in between;
the first ``--skip`` steps (pipeline fill, PPO's first block) are left out of the figures. With
``--repeats R`` the modes run R times in rotating order and each figure is the median (on a shared
machine the load of other processes moves throughput more than the mode does; the 1-minute load
average at the end of each run is printed). Per mode:
trained samples/s (wall clock of the updates), samples per core-second (compute, generators included),
generator idle % and trainer idle % (waiting for rollouts), mean lag in versions. Target on GPU:
PipelineRL >= 1.3x synchronous throughput, trainer idle < 10 %. On CPU the trainer and
the generator processes share the machine's cores, so report what you get together with the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

from rlscale.config import compose_run_config, typed
from rlscale.train.loop import train


@dataclass
class ModeResult:
    samples_per_s: float
    samples_per_core_s: float
    generator_idle: float
    trainer_idle: float
    lag_mean: float
    load: float


def median(results: List[ModeResult]) -> ModeResult:
    return ModeResult(*(statistics.median(getattr(r, f) for r in results) for f in ModeResult.__dataclass_fields__))


def modes(k: int, generators: int) -> Dict[str, List[str]]:
    return {"synchronous": ["offpolicy=ppo", "offpolicy.batches_per_version=1"],
            f"PPO-off-policy-{k}": ["offpolicy=ppo", f"offpolicy.batches_per_version={k}"],
            f"PipelineRL-{k}": ["offpolicy=pipeline", f"offpolicy.max_lag={k}", f"offpolicy.num_generators={generators}"]}


def summarize(run_dir: Path, skip: int) -> ModeResult:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_lines = [r for r in lines if r["kind"] == "train"]
    before = train_lines[skip - 1]
    measured = train_lines[skip:]
    wall = sum(r["step_seconds"] for r in measured)
    samples = sum(r["samples_per_s"] * r["step_seconds"] for r in measured)
    core_s = 3600.0 * (measured[-1]["core_hours"] - before["core_hours"])
    return ModeResult(samples_per_s=samples / wall, samples_per_core_s=samples / core_s,
                      generator_idle=sum(r["generator_idle_frac"] * r["step_seconds"] for r in measured) / wall,
                      trainer_idle=sum(r["trainer_wait_s"] for r in measured) / wall,
                      lag_mean=sum(r["lag_mean"] for r in measured) / len(measured), load=os.getloadavg()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--skip", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0,
                        help="engine.threads: torch threads of a run, PipelineRL splits them (0: all cores)")
    parser.add_argument("--generators", type=int, default=1, help="PipelineRL generator processes")
    parser.add_argument("--repeats", type=int, default=1, help="runs per mode, in rotating order (median)")
    args = parser.parse_args()
    if not 0 < args.skip < args.steps:
        parser.error("need 0 < --skip < --steps")
    common = [f"trainer.max_steps={args.steps}", f"trainer.eval_every={args.steps + 1}",
              f"trainer.checkpoint_every={args.steps + 1}", f"engine.threads={args.threads}"]
    names = list(modes(args.k, args.generators))
    runs: Dict[str, List[ModeResult]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                run_dir = Path(tmp) / f"{name}-{repeat}"
                state = train(typed(compose_run_config([*modes(args.k, args.generators)[name], *common, f"out={run_dir}"])), run_dir)
                if state != "done":
                    raise SystemExit(f"{name}: run ended {state}: {(run_dir / 'status.json').read_text()}")
                runs[name].append(summarize(run_dir, args.skip))
    results = {name: median(rs) for name, rs in runs.items()}
    cfg = compose_run_config(common)
    print(f"\nembedded default, batch {cfg.batch.prompts} prompts x {cfg.batch.generations} generations, "
          f"steps {args.skip + 1}..{args.steps} measured, engine.threads={args.threads}, "
          f"{args.generators} generator process(es), {os.cpu_count()} CPU cores, median of {args.repeats} run(s)")
    print(f"{'mode':<20}{'samples/s':>10}{'samples/core-s':>16}{'gen idle %':>12}{'trainer idle %':>16}"
          f"{'mean lag':>10}{'load':>7}")
    for name, r in results.items():
        print(f"{name:<20}{r.samples_per_s:>10.1f}{r.samples_per_core_s:>16.1f}{100 * r.generator_idle:>12.1f}"
              f"{100 * r.trainer_idle:>16.1f}{r.lag_mean:>10.2f}{r.load:>7.1f}")
    sync, pipe = results["synchronous"], results[f"PipelineRL-{args.k}"]
    print(f"PipelineRL-{args.k} / synchronous throughput: {pipe.samples_per_s / sync.samples_per_s:.2f}x "
          f"(GPU target >= 1.3x with trainer idle < 10 %)")


if __name__ == "__main__":  # the generator processes re-import this module
    main()
