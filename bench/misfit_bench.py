"""Benchmark of the misfit test (rlscale.fit.misfit) on synthetic runs with known truth: how often a sigmoid run
gets a note (false misfits, target <= 5 % in every cell), how often a power-law run and a run with a step
change at 70 % of its compute do (detection, target >= 80 % on 30+ evals), whether the step is placed near
the truth, and what the test costs per run. Columns: the share of runs noted, the counts of step and power-law
notes, the median relative distance of a found step to the truth, the share of runs whose step p-value is below
0.05, 0.01 (STEP_ALPHA) and 0.001, and the median power-law log-likelihood ratio (POWER_LLR 3).

    python bench/misfit_bench.py [--runs 200] [--quick] [--jobs 1]
    python bench/misfit_bench.py --runs 2    # seconds: every cell, 2 runs each

Truths: Table 1's scalerl and code sigmoids (rlscale.testing.curves), the power law of
rlscale.testing.misfit_curves.PowerLawSpec, and scalerl with a step of +0.05 / +0.10 at 70 %. Noise
(EvalDraw): an AR(1) drift of sd 0.005, 0.01, 0.02 (phi 0.9); binomial evals of 400 samples, or a fixed eval set
of 100 prompts x 4 samples; 9, 30 or 64 evals up to 16k GPU-hours. Each run is fitted by rlscale.fit.one_run
(fast method, no bootstrap: the test does not use it).
"""
from __future__ import annotations

import argparse
import itertools
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, List

import numpy as np

from rlscale.fit.curves import Curve
from rlscale.fit.misfit import POWER_LAW_BETTER, STEP_CHANGE, assess_misfit
from rlscale.fit.one_run import fit_curve, window_points
from rlscale.fit.results import FitSettings, RunFit
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve
from rlscale.testing.misfit_curves import PowerLawSpec, StepSpec, power_law_run, step_run

DRIFTS = (0.005, 0.01, 0.02)
EVALS = (9, 30, 64)
DRAWS = {"binomial": dict(samples=400), "clustered": dict(prompts=100, per_prompt=4)}
SETTINGS = FitSettings(n_boot=0)
ALPHAS = (0.05, 0.01, 0.001)  # the step test's rates at other levels than STEP_ALPHA, for its calibration


def draw_of(kind: str, drift: float, evals: int) -> EvalDraw:
    return EvalDraw(drift_sd=drift, drift_phi=0.9, every=16000.0 / (evals - 1), **DRAWS[kind])


def truths(step_at: float):
    yield "sigmoid scalerl", lambda d, rng: drawn_curve(TABLE1["scalerl"], d, rng)
    yield "sigmoid code", lambda d, rng: drawn_curve(TABLE1["code"], d, rng)
    yield "power law", lambda d, rng: power_law_run(PowerLawSpec(), d, rng)
    for step in (0.05, 0.10):
        yield f"step +{step:.2f}", lambda d, rng, s=step: step_run(StepSpec(TABLE1["scalerl"], s, step_at), d, rng)


def fitted(make: Callable, draw: EvalDraw, runs: int, seed: int) -> List[RunFit]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        curve: Curve = make(draw, rng)
        out.append(fit_curve(curve, SETTINGS))
    return out


def cell(t: int, runs: int):
    """One row of the table: the cell's notes, the step's placement and the test's cost over its first runs."""
    (name, make), kind, drift, evals = list(itertools.product(truths(0.7), DRAWS, DRIFTS, EVALS))[t]
    draw = draw_of(kind, drift, evals)
    fits = [f for f in fitted(make, draw, runs, 1000 + t) if f.fitted]
    reasons = [f.misfit for f in fits]
    step = sum(r.startswith(STEP_CHANGE) for r in reasons)
    power = sum(r == POWER_LAW_BETTER for r in reasons)
    where = [abs(float(r[len(STEP_CHANGE):]) / (0.7 * 16000) - 1) for r in reasons if r.startswith(STEP_CHANGE)]
    cost = 0.0
    for f in fits[:10]:
        x, y, _ = window_points(f, SETTINGS)
        start = time.perf_counter()
        assess_misfit(x, y, f)
        cost += time.perf_counter() - start
    noted = (step + power) / max(len(fits), 1)
    p = np.array([f.misfit_p for f in fits if f.misfit_p is not None])
    llr = np.array([f.misfit_llr for f in fits if f.misfit_llr is not None])
    rates = "".join(f"{np.mean(p < a) if p.size else float('nan'):>8.0%}" for a in ALPHAS)
    row = (f"{name:<16}{kind:<10}{drift:>6.3f}{evals:>6}{noted:>7.0%}{step:>6}{power:>6}"
           f"{(np.median(where) if where else float('nan')):>8.2f}{rates}"
           f"{(np.median(llr) if llr.size else float('nan')):>8.1f}{len(fits):>5}")
    return row, cost, min(10, len(fits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per cell")
    parser.add_argument("--quick", action="store_true", help="40 runs per cell")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    args = parser.parse_args()
    runs = 40 if args.quick else args.runs
    print(f"{'truth':<16}{'draw':<10}{'drift':>6}{'evals':>6}{'noted':>7}{'step':>6}{'power':>6}"
          f"{'|dC|/C':>8}" + "".join(f"{f'p<{a:g}':>8}" for a in ALPHAS) + f"{'llr med':>8}{'ok':>5}")
    cells = range(len(list(itertools.product(truths(0.7), DRAWS, DRIFTS, EVALS))))
    cost, tested = 0.0, 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for row, seconds, n in pool.map(cell, cells, itertools.repeat(runs)):
            print(row, flush=True)
            cost, tested = cost + seconds, tested + n
    print(f"misfit test: {1e3 * cost / tested:.2f} ms per run (mean of {tested})")


if __name__ == "__main__":
    main()
