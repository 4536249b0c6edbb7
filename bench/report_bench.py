"""Benchmark of ``rlscale report --html`` (target: a report of 200 runs in under 30 s on 2 cores).

Builds synthetic results trees (rlscale.testing.results_tree: Eq.-1 curves of ScaleRL, train lines with every
diagnostic, failed and diverged runs, fits.json newer than the metrics so no refit happens), then times
the command as a user runs it (a fresh process, imports included) and, in-process, its two stages: reading
the results and drawing the figures plus writing the page. Prints a markdown table.

    python bench/report_bench.py                       # 50 and 200 runs over 10 sweeps
    python bench/report_bench.py --runs 200 --train-lines 5000
    python bench/report_bench.py --runs 6 --sweeps 2 --loo-sweeps 1 --train-lines 20    # seconds
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlscale.report.build import write_report
from rlscale.report.inputs import load_fits
from rlscale.report.content import load_report
from rlscale.report.pool import workers
from rlscale.testing.results_tree import synthetic_plan, write_results

LIMIT_S = 30.0


def bench(n_runs: int, n_sweeps: int, n_loo: int, train_lines: int, root: Path) -> dict:
    results = root / f"r{n_runs}"
    write_results(results, synthetic_plan(n_runs, n_sweeps, n_loo), n_train=train_lines)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlscale.cli", "report", "--html", str(results)], check=True,
                   stderr=subprocess.DEVNULL)
    cli_s = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    report = load_report(results, load_fits(results, log=print), workers())
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    write_report(report, html=results / "report-inprocess.html", n_workers=workers())
    draw_s = time.perf_counter() - t0
    return {"runs": n_runs, "sweeps": n_sweeps, "train_lines": train_lines, "read_s": read_s,
            "draw_s": draw_s, "cli_s": cli_s,
            "cli_cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
            "html_mb": (results / "report.html").stat().st_size / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--sweeps", type=int, default=10)
    parser.add_argument("--loo-sweeps", type=int, default=3)
    parser.add_argument("--train-lines", type=int, default=1000, help="train lines per run's metrics.jsonl")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report_bench_") as tmp:
        rows = [bench(n, args.sweeps, args.loo_sweeps, args.train_lines, Path(tmp)) for n in args.runs]
    print(f"{workers()} usable cores (of {os.cpu_count()}), load average {os.getloadavg()[0]:.1f} at the end; "
          f"limit {LIMIT_S:g} s for 200 runs")
    print("| runs | sweeps | train lines/run | read (s) | figures + page (s) | `rlscale report --html` wall (s) "
          "| its CPU (s) | report.html (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['runs']} | {r['sweeps']} | {r['train_lines']} | {r['read_s']:.2f} | {r['draw_s']:.2f} "
              f"| {r['cli_s']:.2f} | {r['cli_cpu_s']:.2f} | {r['html_mb']:.1f} |")
    slow = [r for r in rows if r["runs"] >= 200 and r["cli_s"] > LIMIT_S]
    sys.exit(1 if slow else 0)


if __name__ == "__main__":
    main()
