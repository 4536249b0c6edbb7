"""Benchmark of ``rlscale fit``: App. A.5's grid method vs the fast method on the same runs, and
the fast method with bootstrap intervals on 1,000 runs through the public API.

    python bench/fit_bench.py [--runs-paper 10] [--runs-boot 1000] [--points 100] [--n-boot 200] [--jobs 1 2]

Targets: fast at least 100x faster than paper per run and never a higher SSE; 1,000 runs x 100 points with
bootstrap in under 60 s on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from rlscale.fit.api import fit_results, write_outputs
from rlscale.fit.fast import fit_fast
from rlscale.fit.paper import fit_paper
from rlscale.fit.schema import FitSettings
from rlscale.fit.space import search_space
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run
from rlscale.fit.window import fit_window


def paper_vs_fast(n_runs: int, n_points: int) -> None:
    print(f"paper (App. A.5 grid, 71 A x 100 C_mid, curve_fit for B) vs fast, {n_points} points per run")
    print(f"{'run':<14}{'paper s':>9}{'fast ms':>9}{'ratio':>8}{'SSE paper':>12}{'SSE fast':>12}{'fast-paper':>12}")
    ratios, diffs = [], []
    names = list(TABLE1)
    for i in range(n_runs):
        name = names[i % len(names)]
        x, y = synthetic_curve(TABLE1[name], n_points, 0.01, np.random.default_rng(i))
        windows = {m: fit_window(x, FitSettings(method=m)) for m in ("paper", "fast")}
        mask = windows["fast"].mask(x)
        start = time.perf_counter()
        paper = fit_paper(x[mask], y[mask], y[0], search_space(FitSettings(method="paper"), windows["paper"]))
        t_paper = time.perf_counter() - start
        start = time.perf_counter()
        fast = fit_fast(x[mask], y[mask], y[0], search_space(FitSettings(method="fast"), windows["fast"]))
        t_fast = time.perf_counter() - start
        ratios.append(t_paper / t_fast)
        diffs.append(fast.sse - paper.sse)
        print(f"{name:<14}{t_paper:>9.2f}{1e3 * t_fast:>9.1f}{ratios[-1]:>8.0f}{paper.sse:>12.6f}{fast.sse:>12.6f}"
              f"{diffs[-1]:>12.2e}")
    print(f"speed-up: median {statistics.median(ratios):.0f}x, min {min(ratios):.0f}x (target >= 100x); "
          f"worst SSE difference fast - paper: {max(diffs):.2e} (target <= 0)")


def bootstrap_many(n_runs: int, n_points: int, n_boot: int, jobs: int) -> None:
    names = list(TABLE1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        for i in range(n_runs):
            x, y = synthetic_curve(TABLE1[names[i % len(names)]], n_points, 0.01, np.random.default_rng(10_000 + i))
            write_run(root / "bench" / f"{names[i % len(names)]}_s{i // len(names)}", x, y, seed=i // len(names))
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        results = fit_results(root, FitSettings(n_boot=n_boot), jobs=jobs)
        t_fit = time.perf_counter() - start
        write_outputs(results, root)
        t_all, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    ok = sum(r.status == "ok" for r in results.runs)
    print(f"fast + bootstrap ({n_boot} resamples) + power law + ranking, {n_runs} runs x {n_points} points, "
          f"{jobs} process(es): {t_fit:.1f} s fit_results, {t_all:.1f} s with outputs (wall; target < 60 s), "
          f"{cpu:.1f} CPU s ({1e3 * cpu / n_runs:.1f} ms/run), {ok} ok; load average {os.getloadavg()[0]:.1f}")


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the worker processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-paper", type=int, default=10)
    parser.add_argument("--runs-boot", type=int, default=1000)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="process counts to time")
    args = parser.parse_args()
    if args.runs_paper:
        paper_vs_fast(args.runs_paper, args.points)
    for jobs in args.jobs:
        bootstrap_many(args.runs_boot, args.points, args.n_boot, jobs)


if __name__ == "__main__":
    main()
