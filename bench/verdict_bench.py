"""How often the LOO verdicts are right, on synthetic sweeps with known truth at paper-scale noise.

Each sweep is the ScaleRL row of Table 1 (C_mid 2542, B 1.92, A 0.610, R0 0.3) run to 16k GPU-hours with an
eval every 100, 250 or 500 GPU-hours (drawn per sweep), each seed's A jittered by N(0, 0.008) and every eval
by N(0, 0.005); its axes are five exact copies of the base (null axes), one with dA = -0.06 and one with
dB = -0.7. The sweeps are fitted and compared as ``rlscale fit`` does (fast method, default window) with
1 and with 3 seeds per variant, and the table gives

- the false-verdict rate: null axes that get a finding (higher/lower ceiling or efficiency);
- the detection rates: the dA axis read ``lower ceiling``, the dB axis read ``lower efficiency``;

for the verdicts of rlscale.fit.verdicts and, as the baseline measured in the same run on the same fits, the
point-estimate rule (|dA| > margin: ceiling, else dB < 0: lower efficiency), ending with their ratio.
Deterministic (seeded); prints the process CPU time.

    python bench/verdict_bench.py [--sweeps 40] [--n-boot 50] [--out bench/results/verdict_bench.md]
"""
from __future__ import annotations

import argparse
import platform
import subprocess
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List

import numpy as np

from rlscale.fit.compare import compare
from rlscale.fit.run import fit_curve
from rlscale.fit.schema import (FINDINGS, LOWER_CEILING, LOWER_EFFICIENCY, WITHIN_MARGIN, ComparisonRow,
                                FitSettings)
from rlscale.fit.synthetic import TABLE1, LooNoise, loo_sweep
from rlscale.fit.window import describe_rule

NULL_AXES = 5
EFFECTS = {**{f"null{i}": (0.0, 0.0) for i in range(NULL_AXES)}, "ceiling": (-0.06, 0.0), "efficiency": (0.0, -0.7)}
EVERY = (100.0, 250.0, 500.0)


def point_rule(row: ComparisonRow, margin: float) -> str:
    """The baseline: the verdict from the point estimates alone."""
    if row.dA < -margin:
        return LOWER_CEILING
    if row.dA > margin:
        return "higher ceiling"
    return LOWER_EFFICIENCY if row.dB < 0 else WITHIN_MARGIN


def run(n_sweeps: int, n_seeds: int, settings: FitSettings) -> Dict[str, Counter]:
    """Counts of (rule, outcome) over ``n_sweeps`` sweeps."""
    counts: Dict[str, Counter] = {"new": Counter(), "old": Counter()}
    for index in range(n_sweeps):
        rng = np.random.default_rng([n_seeds, index])
        noise = LooNoise(every=float(rng.choice(EVERY)))
        curves, spec = loo_sweep(TABLE1["scalerl"], EFFECTS, n_seeds, rng, noise=noise)
        runs = [fit_curve(c, settings) for c in curves]
        for row in compare(runs, {"loo": spec}, settings):
            if row.kind != "loo" or row.variant == "base":
                continue
            for rule, said in (("new", row.verdict), ("old", point_rule(row, settings.margin))):
                if row.variant.startswith("null"):
                    counts[rule]["null"] += 1
                    counts[rule]["false"] += said in FINDINGS
                elif row.variant == "ceiling":
                    counts[rule]["ceiling"] += 1
                    counts[rule]["ceiling_found"] += said == LOWER_CEILING
                else:
                    counts[rule]["efficiency"] += 1
                    counts[rule]["efficiency_found"] += said == LOWER_EFFICIENCY
    return counts


def rates(c: Counter) -> List[float]:
    return [c["false"] / c["null"], c["ceiling_found"] / c["ceiling"], c["efficiency_found"] / c["efficiency"]]


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=40)
    parser.add_argument("--n-boot", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    args = parser.parse_args()
    settings = FitSettings(x="gpu_hours", n_boot=args.n_boot)
    settings.cutoff_rule = describe_rule(settings)
    start = time.process_time()
    lines = [f"| seeds | rule | false verdicts on null axes | dA = -0.06 found | dB = -0.7 found |",
             "|---|---|---|---|---|"]
    ratios = []
    for n_seeds in (1, 3):
        counts = run(args.sweeps, n_seeds, settings)
        new, old = rates(counts["new"]), rates(counts["old"])
        for rule, values in (("verdicts (intervals)", new), ("baseline: point estimates", old)):
            lines.append(f"| {n_seeds} | {rule} | " + " | ".join(f"{v:.1%}" for v in values) + " |")
        ratios.append((n_seeds, [n / o if o else float("nan") for n, o in zip(new, old)]))
    lines += ["", "| seeds | ratio new / baseline: false verdicts | dA found | dB found |", "|---|---|---|---|"]
    lines += [f"| {n} | " + " | ".join(f"{r:.2f}" for r in values) + " |" for n, values in ratios]
    cpu = time.process_time() - start
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    head = [f"# verdict_bench: {args.sweeps} synthetic LOO sweeps per seed count, {NULL_AXES} null axes each",
            "",
            f"{datetime.now(timezone.utc):%Y-%m-%d}, {_cpu_model()} ({platform.machine()}), commit {commit}; fast "
            f"method, --n-boot {args.n_boot}, {len(EFFECTS) + 1} variants per sweep; process CPU {cpu:.0f} s.", ""]
    text = "\n".join(head + lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
