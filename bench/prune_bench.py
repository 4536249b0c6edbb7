"""How much compute pruning saves and whether it keeps the best variant; how often ``rlscale plan`` picks
the best variant at 16k GPU-hours from the first 4k or 8k; on synthetic sweeps with known truth.

Scenarios (Table 1 rows of the paper, R0 0.3, each run to 16k GPU-hours with an eval every 200, each
seed's A jittered by N(0, 0.008), every eval by N(0, 0.005), 3 seeds per variant):

- ``table1``: all ten rows (true best at 16k: scout_moe);
- ``close``: the nine rows without scout_moe (true best scalerl, three others within 0.011 of it);
- ``batch``: batch 512 / 768 (scalerl) / 2048, the batch-size crossover (true best 768, 512 within 0.01).

Pruning at 25 % and 50 % of the planned compute (4k and 8k) by rlscale.fit.pruning (fits as ``rlscale
fit`` makes them, fast method, default window, --n-boot 100); the compute saved is the planned compute
the pruned runs did not use, as a fraction of the unpruned sweep. The plan at 16k is the top tier of
rlscale.fit.predict at the budget, fitted on the data up to 4k or 8k; it is right when the true best is
in it. The baselines, measured in the same run on the same curves: pruning every variant whose current
reward (seed mean of the last eval) is below the current best's by more than the margin, and planning
by the highest current reward. For scale, ``oracle`` is the saving of stopping at the first rung exactly
the variants whose true reward at 16k is below the true best's by more than the margin (the most any rule
that keeps every variant within the margin can save). Deterministic (seeded); prints the process CPU time.

    python bench/prune_bench.py [--sweeps 50] [--out bench/results/prune_bench.md]
    python bench/prune_bench.py --sweeps 1    # seconds: one sweep per scenario
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from rlscale.fit.curves import Curve
from rlscale.fit.forms import sigmoid
from rlscale.fit.predict import predict_variants, predicted_tiers
from rlscale.fit.pruning import decide
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitSettings
from rlscale.testing.curves import R0, TABLE1, CurveSpec, sweep_curves, truncated

BUDGET = 16000.0
RUNGS = (0.25, 0.5)
RUNG_X = tuple(r * BUDGET for r in RUNGS)
MARGIN = 0.02
SCENARIOS: Dict[str, Dict[str, CurveSpec]] = {
    "table1": dict(TABLE1),
    "close": {k: v for k, v in TABLE1.items() if k != "scout_moe"},
    "batch": {"batch_768": TABLE1["scalerl"], "batch_512": TABLE1["batch_512"], "batch_2048": TABLE1["batch_2048"]},
}


@dataclass
class Outcome:
    """One sweep: pruning (rule, baseline) keeps the best and saves; plan picks at 4k/8k (rule, baseline)."""

    kept: bool
    saved: float
    naive_kept: bool
    naive_saved: float
    plan: Dict[float, bool]
    plan_tie: Dict[float, int]
    naive_plan: Dict[float, bool]
    oracle: float


def current(curves: Sequence[Curve], x: float) -> Dict[str, float]:
    """Seed mean of each variant's last eval at or below x."""
    values: Dict[str, List[float]] = {}
    for c in curves:
        values.setdefault(c.variant, []).append(float(truncated(c, x).y[-1]))
    return {k: statistics.fmean(v) for k, v in values.items()}


def one_sweep(specs: Dict[str, CurveSpec], rng: np.random.Generator, settings: FitSettings) -> Outcome:
    curves, _ = sweep_curves(specs, 3, rng)
    truth = {k: float(sigmoid(BUDGET, R0, s.A, s.B, s.C_mid)) for k, s in specs.items()}
    best = max(truth, key=truth.get)
    alive, naive_alive = set(specs), set(specs)
    saved = naive_saved = 0.0
    plan, tie, naive_plan = {}, {}, {}
    for rung in RUNGS:
        x = rung * BUDGET
        runs = [fit_curve(truncated(c, x), settings) for c in curves]
        predictions = predict_variants(runs, settings, BUDGET)
        top = predicted_tiers(predictions, MARGIN, settings.ci_level)[0]
        plan[x], tie[x] = best in {p.variant for p in top}, len(top)
        now = current(curves, x)
        naive_plan[x] = max(now, key=now.get) == best
        pruned = {d.variant for d in decide([p for p in predictions if p.variant in alive], MARGIN,
                                            settings.ci_level) if d.pruned}
        lead = max(now[v] for v in naive_alive)
        naive_pruned = {v for v in naive_alive if now[v] < lead - MARGIN}
        saved += (1 - rung) * len(pruned) / len(specs)
        naive_saved += (1 - rung) * len(naive_pruned) / len(specs)
        alive -= pruned
        naive_alive -= naive_pruned
    oracle = (1 - RUNGS[0]) * sum(truth[best] - v > MARGIN for v in truth.values()) / len(specs)
    return Outcome(best in alive, saved, best in naive_alive, naive_saved, plan, tie, naive_plan, oracle)


def pct(values: Sequence[float]) -> str:
    return f"{100 * statistics.fmean(values):.0f} %"


def tie_size(outs: Sequence[Outcome], x: float) -> float:
    return statistics.fmean(o.plan_tie[x] for o in outs)


def table(results: Dict[str, List[Outcome]]) -> List[str]:
    lines = ["| sweeps | rule | keeps true best | compute saved | plan right from 4k (top-tier size) | "
             "plan right from 8k (top-tier size) |", "|---|---|---|---|---|---|"]
    for name, outs in results.items():
        n = len(outs)
        lines.append(f"| {name} x{n} | intervals | {pct([o.kept for o in outs])} | {pct([o.saved for o in outs])} | "
                     + " | ".join(f"{pct([o.plan[x] for o in outs])} ({tie_size(outs, x):.1f})" for x in RUNG_X) + " |")
        lines.append(f"| {name} x{n} | current reward | {pct([o.naive_kept for o in outs])} | "
                     f"{pct([o.naive_saved for o in outs])} | "
                     + " | ".join(f"{pct([o.naive_plan[x] for o in outs])} (1.0)" for x in RUNG_X) + " |")
        lines.append(f"| {name} x{n} | oracle | 100 % | {pct([o.oracle for o in outs])} | | |")
    every = [o for outs in results.values() for o in outs]
    lines.append(f"| all x{len(every)} | intervals | {pct([o.kept for o in every])} | "
                 f"{pct([o.saved for o in every])} | "
                 + " | ".join(pct([o.plan[x] for o in every]) for x in RUNG_X) + " |")
    lines.append(f"| all x{len(every)} | current reward | {pct([o.naive_kept for o in every])} | "
                 f"{pct([o.naive_saved for o in every])} | "
                 + " | ".join(pct([o.naive_plan[x] for o in every]) for x in RUNG_X) + " |")
    def ratio(pair) -> float:
        return statistics.fmean(pair(o)[0] for o in every) / max(statistics.fmean(pair(o)[1] for o in every), 1e-9)

    lines.append(f"| ratio | intervals / current reward | {ratio(lambda o: (o.kept, o.naive_kept)):.2f}x | "
                 f"{ratio(lambda o: (o.saved, o.naive_saved)):.2f}x | "
                 + " | ".join(f"{ratio(lambda o, x=x: (o.plan[x], o.naive_plan[x])):.2f}x" for x in RUNG_X)
                 + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    settings = FitSettings(x="gpu_hours", predict_at=[BUDGET], n_boot=100, margin=MARGIN)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    start = time.process_time()
    results = {name: [one_sweep(specs, np.random.default_rng([k, i]), settings) for i in range(args.sweeps)]
               for k, (name, specs) in enumerate(SCENARIOS.items())}
    cpu = time.process_time() - start
    header = [f"# prune_bench: {datetime.now(timezone.utc):%Y-%m-%d}, {platform.processor() or platform.machine()} "
              f"({platform.node()}), commit {commit}", "",
              f"{args.sweeps} sweeps per scenario, 3 seeds, rungs at 25 % and 50 % of 16k GPU-h, margin {MARGIN}, "
              f"plan at 16k; process CPU {cpu:.0f} s.", ""]
    text = "\n".join(header + table(results)) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
