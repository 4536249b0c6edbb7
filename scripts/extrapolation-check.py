"""Calibration of rlscale fit's extrapolation check on every committed real run (docs/examples/*/).

Each study's sweep folder (the folder holding sweep.json) is fitted as ``rlscale fit DIR --fit-until P%`` does
(rlscale.fit.api.fit_results, the default settings), at 25 % and at 50 % of each run's compute, and every run's
prediction of the mean of its last three evals is checked: whether the 95 % prediction interval holds the
observed value (rlscale.fit.forecast), and the median |error| of the sigmoid, of carrying the last three fitted
evals forward and of the App. A.4 power law. One table per fraction, one row per study and one over all runs,
written as markdown (``--out``, default bench/results/extrapolation-check.md, the measurement that
docs/extrapolation.md quotes) and printed.

    python scripts/extrapolation-check.py [--examples docs/examples] [--out bench/results/extrapolation-check.md]
                                          [--jobs 1]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import List, Sequence, Tuple

from rlscale.fit.api import fit_results
from rlscale.fit.forecast import METHODS, summarize
from rlscale.fit.results import FitSettings, RunFit

FRACTIONS = (0.25, 0.50)


def studies(examples: Path) -> List[Path]:
    """The sweep folders of every study under ``examples``."""
    return sorted(p.parent for p in examples.glob("*/*/sweep.json"))


def check(folder: Path, fraction: float, jobs: int) -> List[RunFit]:
    return fit_results(folder, FitSettings(fit_until_frac=fraction), jobs=jobs).runs


def row(name: str, runs: Sequence[RunFit], level: float) -> str:
    s = summarize(runs, level)
    if s is None:
        return f"| {name} | 0 | - | - | - | - | - |"
    errors = [f"{s.errors[m][0]:.3f}" if m in s.errors else "-" for m in METHODS]
    wins = ", ".join(f"{m} {s.wins[m]}" for m in METHODS)
    return f"| {name} | {s.n} | {s.covered}/{s.n} ({s.covered / s.n:.0%}) | " + " | ".join(errors) + \
        f" | {s.best} ({wins}) |"


def table(results: List[Tuple[str, List[RunFit]]], fraction: float, level: float) -> List[str]:
    lines = [f"### Fitted on {fraction:.0%} of each run's compute", "",
             "| study | runs | 95 % interval held the end | median abs err sigmoid | carry-forward | power law | "
             "best by median (runs best beyond noise) |", "|---|---|---|---|---|---|---|"]
    lines += [row(name, runs, level) for name, runs in results]
    lines.append(row("**all**", [r for _, runs in results for r in runs], level))
    return lines + [""]


def machine() -> str:
    """This machine in words: its cores, CPU model and architecture."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{os.cpu_count()}-core {model}, {platform.machine()}"


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=Path("docs/examples"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/extrapolation-check.md"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--date", default=f"{date.today():%Y-%m-%d}")
    parser.add_argument("--machine", default=machine())
    args = parser.parse_args(list(argv) or None)
    folders = studies(args.examples)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    level = FitSettings().ci_level
    body = []
    for fraction in FRACTIONS:
        results = [(f.parent.name, check(f, fraction, args.jobs)) for f in folders]
        body += table(results, fraction, level)
        print("\n".join(body[-len(results) - 5:]), flush=True)
    head = [f"Measured {args.date} on {args.machine} ({platform.python_version()}), commit {commit}: "
            f"`python scripts/extrapolation-check.py`.", ""]
    args.out.write_text("\n".join(head + body))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
