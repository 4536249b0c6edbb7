"""Benchmark of ``rlscale fit``: the fast fit against App. A.5's grid on the same runs, timed in the same process,
and 1,000 runs with every interval fitted end to end through the public API.

    python bench/fit_bench.py [--quick] [--runs-paper 10] [--runs-boot 1000] [--points 100] [--n-boot 200]
                              [--jobs 2 ...] [--out bench/results/fit_bench.md]

1. Per run, on the same points: App. A.5's grid (rlscale.fit.paper: 71 A x 100 C_mid cells, B by curve_fit in
   each) against the fast fit, i.e. everything ``rlscale fit --n-boot 0`` computes for a run
   (rlscale.fit.one_run.fit_curve: the point fit, the residual noise, A's profile interval, the power law). The fast
   time is the median of REPEATS fits after one warm-up fit of the same run: a process computes the AR(1)
   eigenvectors of a run length once (rlscale.fit.correlated), and that one-off cost is reported apart. Both
   run with one BLAS thread, as rlscale.fit.api runs the fits.
   Targets: the median ratio at least 100x, and the fast SSE never above the grid's.
2. ``--runs-boot`` runs of ``--points`` evals written as a results folder, fitted by
   rlscale.fit.api.fit_results with every interval (``--n-boot``) in ``--jobs`` processes, outputs written.
   Target: 1,000 runs in under 60 s on 2 cores.

``--quick`` (CI, tests/unit/fit/test_fit_bench.py; a few seconds): 1 run of 30 evals in part 1, 40 runs with
``--n-boot 50`` in one process in part 2. The load average (``uptime``) is printed with the results: the machine
may be shared.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List

import numpy as np
from threadpoolctl import threadpool_limits

from lib import record
from rlscale.fit.api import fit_results, write_outputs
from rlscale.fit.curves import Curve
from rlscale.fit.paper import fit_paper
from rlscale.fit.one_run import fit_curve, window_points
from rlscale.fit.results import FitSettings
from rlscale.fit.space import search_space
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

REPEATS = 5
NOISE = 0.01


def paper_vs_fast(n_runs: int, n_points: int) -> List[str]:
    """Part 1 (module docstring): a markdown table, one row per run, then the median, ending in the ratio."""
    fast_settings = FitSettings(x="gpu_hours", n_boot=0)
    paper_settings = FitSettings(x="gpu_hours", n_boot=0, method="paper")
    names = list(TABLE1)
    first_extra, ratios, worst = [], [], -np.inf
    lines = ["| run | fitted points | paper grid s | fast fit ms | SSE paper | SSE fast | fast / paper |",
             "|---|---|---|---|---|---|---|"]
    for i in range(n_runs):
        name = names[i % len(names)]
        curve = _curve(name, *synthetic_curve(TABLE1[name], n_points, NOISE, np.random.default_rng(i)))
        start = time.perf_counter()
        run = fit_curve(curve, fast_settings)
        cold = time.perf_counter() - start
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            fit_curve(curve, fast_settings)
            times.append(time.perf_counter() - start)
        t_fast = statistics.median(times)
        x, y, window = window_points(run, fast_settings)
        start = time.perf_counter()
        paper = fit_paper(x, y, run.R0, search_space(paper_settings, window))
        t_paper = time.perf_counter() - start
        ratios.append(t_paper / t_fast)
        worst = max(worst, run.sse - paper.sse)
        first_extra.append(cold - t_fast)
        lines.append(f"| {name} | {x.size} | {t_paper:.2f} | {1e3 * t_fast:.1f} | {paper.sse:.6f} | {run.sse:.6f} | "
                     f"{ratios[-1]:.0f}x |")
    lines.append(f"| **median** of {n_runs} | | | | | | **{statistics.median(ratios):.0f}x** |")
    lines += ["", f"Minimum {min(ratios):.0f}x (target: median >= 100x). Worst SSE fast - paper: {worst:.2e} (target "
              f"<= 0). The process's first fit took {1e3 * first_extra[0]:.0f} ms more than the median: the AR(1) "
              f"eigenvectors of its run length, computed once per process, and first-call costs."]
    return lines


def bootstrap_many(n_runs: int, n_points: int, n_boot: int, jobs: int) -> List[str]:
    """Part 2 (module docstring): one line."""
    names = list(TABLE1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        for i in range(n_runs):
            name = names[i % len(names)]
            x, y = synthetic_curve(TABLE1[name], n_points, NOISE, np.random.default_rng(10_000 + i))
            write_run(root / "bench" / f"{name}_s{i // len(names)}", x, y, seed=i // len(names))
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        results = fit_results(root, FitSettings(n_boot=n_boot), jobs=jobs)
        t_fit = time.perf_counter() - start
        write_outputs(results, root)
        t_all, cpu = time.perf_counter() - start, _cpu_seconds() - cpu_start
    ok = sum(r.status == "ok" for r in results.runs)
    return [f"| {n_runs} x {n_points} | {n_boot} | {jobs} | {t_fit:.1f} | {t_all:.1f} | {cpu:.1f} | "
            f"{1e3 * cpu / n_runs:.1f} | {ok} | {t_all / 60:.2f} |"]


def _curve(name: str, x: np.ndarray, y: np.ndarray) -> Curve:
    return Curve(sweep="bench", variant=name, seed=0, run_path=f"bench/{name}", x=x, y=y,
                 t=np.arange(x.size, dtype=float), se=np.full(x.size, np.nan), samples=np.full(x.size, np.nan),
                 t_axis="step")


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the worker processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run of a few seconds (module docstring)")
    parser.add_argument("--runs-paper", type=int, default=10)
    parser.add_argument("--runs-boot", type=int, default=1000)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--jobs", type=int, nargs="+", default=None,
                        help="process counts to time in part 2 (default 2; 1 with --quick)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results here (markdown)")
    args = parser.parse_args()
    if args.quick:
        args.runs_paper, args.runs_boot, args.n_boot = 1, 40, 50
    jobs = args.jobs or [1 if args.quick else 2]
    commit, load_start = record.commit(["rlscale/fit"]), _load()  # the code imported now, before the tree can change under a run
    points_paper = 30 if args.quick else args.points
    lines = [f"## The fast fit (`--n-boot 0`) against App. A.5's grid, {args.runs_paper} run(s) of {points_paper} "
             "evals", ""]
    with threadpool_limits(limits=1, user_api="blas"):
        lines += paper_vs_fast(args.runs_paper, points_paper)
    lines += ["", "## Runs with every interval, end to end (`fit_results` on a results folder, then the outputs)", "",
              "| runs x evals | --n-boot | --jobs | fit_results s | with outputs s | CPU s | CPU ms/run | ok | "
              "wall / 60 s target |", "|---|---|---|---|---|---|---|---|---|"]
    for n_jobs in jobs:
        lines += bootstrap_many(args.runs_boot, args.points, args.n_boot, n_jobs)
    head = [f"# fit_bench: {datetime.now(timezone.utc):%Y-%m-%d}, {record.cpu_model()} ({platform.machine()}, "
            f"{os.cpu_count()} cores), commit {commit}", "",
            f"Load average (1/5/15 min) {load_start} at the start, {_load()} at the end"
            f"{'; --quick' if args.quick else ''}.", ""]
    record.publish(head + lines, args.out)


if __name__ == "__main__":
    main()
