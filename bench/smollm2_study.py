"""Helpers of bench/smollm2_study.sh (the SmolLM2 leave-one-out study on lent GPUs).

    python bench/smollm2_study.py wait RESULTS --until EPOCH   # poll until every run ends or the deadline
    python bench/smollm2_study.py steps RUN_DIR...             # startup, compilation and step times per run
    python bench/smollm2_study.py pack RESULTS OUT.tar.gz      # the run folders without checkpoints

``steps`` prints per run: startup_s (start to first update), compile_s of step 1 and of all later steps,
the median step, the slowest step after the first and its ratio to the median (the study's bar: at most
5x), and seconds from the start to the end of step 1.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path
from typing import List

ENDED = ("done", "failed", "diverged")
SKIPPED = ("checkpoints", ".submitit")


def run_dirs(results: Path) -> List[Path]:
    return sorted(p.parent for p in results.rglob("config.yaml") if ".submitit" not in p.parts)


def state(run: Path) -> str:
    try:
        return json.loads((run / "status.json").read_text()).get("state", "?")
    except (OSError, ValueError):
        return "pending"


def train_lines(run: Path) -> List[dict]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue  # a line being written
    return [r for r in lines if r.get("kind") == "train"]


def cmd_wait(results: Path, until: float, poll: float) -> int:
    while True:
        runs = run_dirs(results)
        states = {r.name: state(r) for r in runs}
        if runs and all(s in ENDED for s in states.values()):
            print(f"all {len(runs)} runs ended: {states}")
            return 0
        if time.time() >= until:
            steps = {r.name: (train_lines(r)[-1]["step"] if train_lines(r) else 0) for r in runs}
            print(f"deadline: states {states}, steps {steps}")
            return 3
        time.sleep(poll)


def cmd_steps(runs: List[Path]) -> int:
    print("| run | steps | startup_s | compile_s step 1 | compile_s later | median step s | slowest later step s "
          "| ratio | start to step 1 end s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        lines = train_lines(run)
        if not lines:
            print(f"| {run.name} | 0 | | | | | | | |")
            continue
        seconds = [r["step_seconds"] for r in lines]
        later = seconds[1:] or [float("nan")]
        median = statistics.median(seconds)
        startup = next((r["startup_s"] for r in lines if "startup_s" in r), float("nan"))
        compile_later = sum(r.get("compile_s", 0.0) for r in lines[1:])
        print(f"| {run.name} | {len(lines)} | {startup:.1f} | {lines[0].get('compile_s', float('nan')):.1f} | "
              f"{compile_later:.1f} | {median:.3f} | {max(later):.3f} | {max(later) / median:.1f} | "
              f"{startup + seconds[0]:.1f} |")
    return 0


def cmd_pack(results: Path, out: Path) -> int:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(results, arcname=results.name,
                filter=lambda info: None if any(part in SKIPPED for part in Path(info.name).parts) else info)
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    wait = sub.add_parser("wait")
    wait.add_argument("results", type=Path)
    wait.add_argument("--until", type=float, required=True, help="deadline, seconds since the epoch")
    wait.add_argument("--poll", type=float, default=5.0)
    steps = sub.add_parser("steps")
    steps.add_argument("runs", type=Path, nargs="+")
    pack = sub.add_parser("pack")
    pack.add_argument("results", type=Path)
    pack.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "wait":
        return cmd_wait(args.results, args.until, args.poll)
    if args.cmd == "steps":
        return cmd_steps(args.runs)
    return cmd_pack(args.results, args.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
