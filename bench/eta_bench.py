"""Benchmark of the sweep's ETA: how far the first ETA ``rlscale sweep`` prints is from the time the sweep then
takes, on the default LOO sweep (``conf=loo``, the embedded default on the CPU), measured in the same run.

    python bench/eta_bench.py [--only scalerl,loss_dapo] [--seeds 2] [--results DIR] [--out FILE]
    python bench/eta_bench.py --quick [--out FILE]    # seconds: one run of 8 updates (--only scalerl --seeds 1)

The sweep runs as a user runs it, its stdout a pipe: off a terminal it prints the summary with its ETA once the
ETA is measured (rlscale.sweep.eta) and after each change of a run's state. Every line is timed as it arrives.
The table lists each summary with an ETA: when it came (seconds since the command started), the ETA, the time
the sweep actually took from then, and their ratio; it ends with the first ETA over the sweep's wall time from
that line on, and over its whole wall time. Target: the first ratio within 1/1.5 .. 1.5.

``--only`` (the sweep's option) trains a subset of the variants: the full sweep (10 variants x 2 seeds) takes
about 9 minutes on 2 cores. The load average (``uptime``) is printed with the results: the machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional, Tuple

from lib import record

ETA = re.compile(r"; ETA (?:(\d+)h(\d\d)m|(\d+)m(\d\d)s)$")


def eta_seconds(line: str) -> Optional[float]:
    """The ETA of a summary line (``... ; ETA 3m10s`` or ``; ETA 1h05m``), else None."""
    found = ETA.search(line)
    if not found:
        return None
    hours, minutes, mins, secs = found.groups()
    return float(int(hours) * 3600 + int(minutes) * 60) if hours else float(int(mins) * 60 + int(secs))


QUICK = ["trainer.max_steps=8", "trainer.eval_every=2"]  # --quick's overrides: the ETA, known after the eval of
# update 2, then has 6 updates and 3 evals to cover, several of the sweep's 2 s polls on a fast machine


def run_sweep(results: Path, only: Optional[str], seeds: Optional[int],
              overrides: List[str]) -> Tuple[List[Tuple[float, str]], float, int]:
    """The sweep's stdout lines with their arrival (seconds since the start), its wall time and exit status."""
    command = [sys.executable, "-m", "rlscale.cli", "sweep", "conf=loo", *overrides, "--results", str(results)]
    command += ["--only", only] * bool(only) + ["--seeds", str(seeds)] * bool(seeds)
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=record.ROOT, env={**os.environ, "PYTHONPATH": str(record.ROOT)})
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in proc.stdout]
    status = proc.wait()
    return lines, time.monotonic() - start, status


def table(lines: List[Tuple[float, str]], wall: float) -> List[str]:
    rows = [(at, eta, line) for at, line in lines if (eta := eta_seconds(line)) is not None]
    out = ["| at (s) | summary | ETA (s) | took from then (s) | ETA / took |", "|---|---|---|---|---|"]
    out += [f"| {at:.0f} | {line.split(';')[0]} | {eta:.0f} | {wall - at:.0f} | {eta / (wall - at):.2f} |"
            for at, eta, line in rows]
    if not rows:
        return out + ["", "no ETA printed"]
    at, eta, _ = rows[0]
    return out + ["", f"first ETA / wall time from that line: {eta:.0f} s / {wall - at:.0f} s = "
                      f"{eta / (wall - at):.2f}",
                  f"first ETA (+ the {at:.0f} s before it) / whole wall time: {eta + at:.0f} s / {wall:.0f} s = "
                  f"{(eta + at) / wall:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="the variants to train (the sweep's --only); default all")
    parser.add_argument("--seeds", type=int, help="seeds per variant (the sweep's --seeds); default the spec's")
    parser.add_argument("--results", type=Path, help="results root (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--quick", action="store_true", help="one variant, one seed, 8 updates (seconds)")
    args = parser.parse_args()
    overrides = QUICK if args.quick else []
    if args.quick:
        args.only, args.seeds = args.only or "scalerl", args.seeds or 1
    commit = record.commit(["rlscale"])
    with tempfile.TemporaryDirectory() as tmp:
        lines, wall, status = run_sweep(args.results or Path(tmp) / "results", args.only, args.seeds, overrides)
    load = os.getloadavg()
    head = [f"# eta_bench: {datetime.now(timezone.utc):%Y-%m-%d}, {record.cpu_model()} ({platform.machine()}, "
            f"{os.cpu_count()} cores), commit {commit}", "",
            f"`rlscale sweep conf=loo{''.join(' ' + o for o in overrides)}`{' --only ' + args.only if args.only else ''}"
            f"{' --seeds ' + str(args.seeds) if args.seeds else ''}: exit status {status}, wall {wall:.0f} s, "
            f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end", ""]
    record.publish(head + table(lines, wall), args.out)


if __name__ == "__main__":
    main()
