"""How well the statistics of ``rlscale fit`` hold on noise models other than their own: coverage of A's
interval on single runs, and the LOO verdicts on synthetic sweeps with known truth.

Every run is the ScaleRL row of Table 1 (C_mid 2542, B 1.92, A 0.610, R0 0.3) to 16k GPU-hours, its evals
drawn as a trainer makes them (rlscale.testing.curves.EvalDraw), not as the fit assumes:

- **drift**: the true reward is Eq. 1 plus an AR(1) drift (correlation 0.9 between evals, stationary sd
  0.005 to 0.02) and each eval is binomial(n, p) / n with its SE sqrt(y (1 - y) / n) written on the curve;
- **independent**: binomial evals without drift (100 and 400 samples), also on runs stopped at 79 % of their
  rise (about 5.1k GPU-hours);
- **clustered prompts**: a fixed eval set of 100-400 prompts, each with its own logit difficulty (sd 1.5 or
  2.5) around the curve, k samples per prompt per eval, the SE over prompts; the truth is the population's A,
  so the eval set's own offset (shared by all its evals) is an error the interval has to hold;
- **seed spread** (verdicts): each seed's A offset ~ N(0, 0.012) (the paper's +-0.015) or N(0, 0.025), with
  the offset and the drift path shared by all variants of one seed (common random numbers, as rlscale's
  trainer draws everything from the seed) or, in one case, drawn per run.

Part 1, coverage: runs of each noise model (evals every 100, 250 and 500 GPU-hours in turn, or 9 or 30 evals
in all, as a short run or an early window has) are fitted with
rlscale.fit.run.fit_curve (fast method, default window); the table gives the share of runs whose 95 % interval
of A holds the true A, over all fitted runs and over those whose A is called identified, and among these the
mean and sd of the error of A (bias) and the median half-width of the interval.

Part 1b, short fits: variants of three seeds (no seed spread, one eval set), each run 9 evals or the first
25 % of 31, fitted as ``rlscale fit`` does (rlscale.fit.api.fit_curves: a fit of fewer than a dozen evals
whose residual variance is below its variant's pooled level is refitted at that level) and, as the
baseline measured in the same run, each run alone (rlscale.fit.run.fit_curve); same columns as Part 1.

Part 2, LOO verdicts: each sweep (evals every 250 GPU-hours, drift 0.01 with 400 samples) has a base, NULL_AXES
exact copies of it (null axes), one axis with dA = -0.06 and one with dB = -0.24 (the paper's DAPO effect), 10
seeds per variant; it is fitted once and compared (rlscale.fit.compare.compare, sweep.json of kind "loo") on
its first 1, 3, 5 and 10 seeds (nested: the 3-seed sweep is part of the 5-seed one). The table gives the
false-verdict rate (null axes that get any finding), the detection rates (the dA axis read ``lower
ceiling``, the dB axis ``lower efficiency``) and the share left unresolved (and of those, for A not
identified in some seed of the base or the axis), for the verdicts of rlscale.fit.verdicts and, as the
baseline measured on the same fits, the point-estimate rule (|dA| > margin: ceiling, else dB < 0: lower
efficiency); it ends with their ratio and the acceptance checks (coverage >= 90 % at drift 0.01/400 and
0.005/16000; false verdicts <= 5 % with 1 and 3 seeds at seed sd 0.012; dA -0.06 found >= 90 % with 3 seeds).
Deterministic (seeded); one BLAS thread (set before numpy is imported, unless the environment says otherwise);
prints the process CPU time. The default takes about 8 CPU-minutes, --quick about 1.

    python bench/verdict_bench.py [--runs 100] [--sweeps 20] [--n-boot 20] [--quick]
                                  [--out bench/results/verdict_bench.md]
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy: one BLAS thread
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from rlscale.fit.compare import compare  # noqa: E402
from rlscale.fit.run import fit_curve  # noqa: E402
from rlscale.fit.schema import (FINDINGS, LOWER_CEILING, LOWER_EFFICIENCY, NOT_IDENTIFIED, REASONS,  # noqa: E402
                                UNRESOLVED, WITHIN_MARGIN, ComparisonRow, FitSettings, RunFit)
from rlscale.fit.api import fit_curves  # noqa: E402
from rlscale.testing.curves import (R0, TABLE1, CurveSpec, EvalDraw, SeedSpread, drawn_curve, rise_x,  # noqa: E402
                                    seeded_loo_sweep, seeded_sweep)
from rlscale.fit.window import describe_rule  # noqa: E402

SPEC = TABLE1["scalerl"]
EVERY = (100.0, 250.0, 500.0)
STOPPED = rise_x(SPEC, 0.79)
NULL_AXES = 5
D_A, D_B = -0.06, -0.24
SEEDS = (1, 3, 5, 10)
SWEEP_DRAW = EvalDraw(samples=400, drift_sd=0.01, every=250.0)

# Part 1: name -> how the evals are drawn, and the eval spacings taken in turn (x_max set per run)
NINE_EVALS, THIRTY_EVALS = (16000.0 / 9,), (16000.0 / 30,)
COVERAGE: Dict[str, Tuple[EvalDraw, Tuple[float, ...]]] = {
    "drift 0.01, 400 samples": (EvalDraw(samples=400, drift_sd=0.01), EVERY),
    "drift 0.005, 16,000 samples": (EvalDraw(samples=16000, drift_sd=0.005), EVERY),
    "drift 0.02, 400 samples": (EvalDraw(samples=400, drift_sd=0.02), EVERY),
    "independent, 100 samples": (EvalDraw(samples=100), EVERY),
    "independent, 400 samples": (EvalDraw(samples=400), EVERY),
    "stopped at 79 % of the rise, 100 samples": (EvalDraw(samples=100, x_max=STOPPED), EVERY),
    "stopped at 79 % of the rise, 400 samples": (EvalDraw(samples=400, x_max=STOPPED), EVERY),
    "200 prompts x 2 samples (difficulty sd 1.5)": (EvalDraw(prompts=200, per_prompt=2), EVERY),
    "200 prompts x 8 samples (difficulty sd 1.5)": (EvalDraw(prompts=200, per_prompt=8), EVERY),
    "9 evals, 400 prompts x 1 (sd 1.5), drift 0.01": (EvalDraw(prompts=400, drift_sd=0.01), NINE_EVALS),
    "9 evals, 100 prompts x 4 (sd 2.5), drift 0.02": (EvalDraw(prompts=100, per_prompt=4, prompt_sd=2.5,
                                                              drift_sd=0.02), NINE_EVALS),
    "30 evals, 100 prompts x 4 (sd 2.5), drift 0.02": (EvalDraw(prompts=100, per_prompt=4, prompt_sd=2.5,
                                                               drift_sd=0.02), THIRTY_EVALS),
}
# Part 1b: name -> (true curve, how the evals are drawn, fraction of each run fitted, R0); SHORT_SEEDS seeds each
SHORT_SEEDS = 3
SHORT_FITS: Dict[str, Tuple[CurveSpec, EvalDraw, Optional[float], float]] = {
    "9 evals, 400 prompts x 1 (sd 1.5), drift 0.01": (SPEC, EvalDraw(prompts=400, drift_sd=0.01,
                                                                     every=NINE_EVALS[0]), None, R0),
    "9 evals, 100 prompts x 4 (sd 2.5), drift 0.02": (SPEC, EvalDraw(prompts=100, per_prompt=4, prompt_sd=2.5,
                                                                     drift_sd=0.02, every=NINE_EVALS[0]), None, R0),
    "first 25 % of 31 evals, R0 0.02 -> A 0.45 (B 3), 1,000 prompts, drift 0.01": (
        CurveSpec(5000, 3.0, 0.45), EvalDraw(prompts=1000, drift_sd=0.01, every=THIRTY_EVALS[0]), 0.25, 0.02),
}
# Part 2: name -> seed spread (every sweep drawn with SWEEP_DRAW)
SPREADS: Dict[str, SeedSpread] = {
    "seed sd 0.012, shared by seed": SeedSpread(a_sd=0.012),
    "seed sd 0.025, shared by seed": SeedSpread(a_sd=0.025),
    "seed sd 0.012, not shared": SeedSpread(a_sd=0.012, shared=False),
}
ACCEPT_COVERAGE = ("drift 0.01, 400 samples", "drift 0.005, 16,000 samples")


@dataclass
class Coverage:
    """Part 1's numbers for one noise model."""

    runs: int = 0
    fitted: int = 0
    covered: int = 0
    identified: int = 0
    covered_identified: int = 0
    errors: Optional[List[float]] = None
    half_widths: Optional[List[float]] = None

    def rate(self, identified: bool = False) -> float:
        n, k = (self.identified, self.covered_identified) if identified else (self.fitted, self.covered)
        return k / n if n else math.nan

    def add(self, run: RunFit, truth: float) -> None:
        """Count one fitted run against the true A."""
        self.runs += 1
        if run.A_lo is None or run.A_hi is None:
            return
        self.fitted += 1
        hit = run.A_lo <= truth <= run.A_hi
        self.covered += hit
        if run.A_identified:
            self.identified += 1
            self.covered_identified += hit
            self.errors.append(run.A - truth)
            self.half_widths.append((run.A_hi - run.A_lo) / 2)

    def row(self, name: str) -> str:
        """The table row of this noise model."""
        errors = self.errors or [math.nan]
        return (f"| {name} | {self.runs} | {self.identified / self.runs:.0%} | {_pct(self.rate())} | "
                f"{_pct(self.rate(identified=True))} | {statistics.fmean(errors):+.4f} | "
                f"{statistics.stdev(errors) if len(errors) > 1 else math.nan:.4f} | "
                f"{statistics.median(self.half_widths) if self.half_widths else math.nan:.4f} |")


def coverage(case: int, draw: EvalDraw, every: Sequence[float], n_runs: int, settings: FitSettings) -> Coverage:
    """Fit ``n_runs`` runs drawn by ``draw`` (eval spacing in turn from ``every``) and count the intervals that
    hold A."""
    out = Coverage(errors=[], half_widths=[])
    for index in range(n_runs):
        rng = np.random.default_rng([case, index])
        out.add(fit_curve(drawn_curve(SPEC, replace(draw, every=every[index % len(every)]), rng), settings), SPEC.A)
    return out


def short_fits(case: int, spec: CurveSpec, draw: EvalDraw, fraction: Optional[float], r0: float, n_sweeps: int,
               settings: FitSettings) -> Tuple[Coverage, Coverage]:
    """Part 1b: ``n_sweeps`` variants of SHORT_SEEDS seeds (no seed spread, one eval set each), fitted up to
    ``fraction`` of each run; (pooled over the seeds as ``rlscale fit`` does, each run alone)."""
    settings = replace(settings, fit_until_frac=fraction)
    settings.cutoff_rule = describe_rule(settings)
    pooled, alone = Coverage(errors=[], half_widths=[]), Coverage(errors=[], half_widths=[])
    for index in range(n_sweeps):
        curves, _ = seeded_sweep({"v": spec}, SHORT_SEEDS, np.random.default_rng([100 + case, index]), draw,
                                 SeedSpread(a_sd=0.0), r0)
        for out, runs in ((pooled, fit_curves(curves, settings)), (alone, [fit_curve(c, settings) for c in curves])):
            for run in runs:
                out.add(run, spec.A)
    return pooled, alone


def point_rule(row: ComparisonRow, margin: float) -> str:
    """The baseline: the verdict from the point estimates alone."""
    if row.dA is not None and row.dA < -margin:
        return LOWER_CEILING
    if row.dA is not None and row.dA > margin:
        return "higher ceiling"
    return LOWER_EFFICIENCY if row.dB is not None and row.dB < 0 else WITHIN_MARGIN


OUTCOMES = ("finding", WITHIN_MARGIN) + REASONS


def outcome(row: ComparisonRow) -> str:
    """A LOO row's verdict: "finding" (any), within margin, or the reason it is unresolved."""
    if row.verdict in FINDINGS:
        return "finding"
    if row.verdict == UNRESOLVED:
        return next((r for r in REASONS if (row.reason or "").startswith(r)), "unresolved, other")
    return row.verdict


def effects(null_axes: int) -> Dict[str, Tuple[float, float]]:
    return {**{f"null{i}": (0.0, 0.0) for i in range(null_axes)}, "ceiling": (D_A, 0.0), "efficiency": (0.0, D_B)}


def verdicts(config: int, spread: SeedSpread, n_sweeps: int, seeds: Sequence[int], null_axes: int,
             settings: FitSettings) -> Dict[Tuple[int, str], Counter]:
    """Counts of outcomes per (seeds, rule) over ``n_sweeps`` sweeps, each fitted once at max(seeds) seeds and
    compared on its first n seeds for every n in ``seeds``."""
    counts: Dict[Tuple[int, str], Counter] = {(n, rule): Counter() for n in seeds for rule in ("new", "old")}
    for index in range(n_sweeps):
        rng = np.random.default_rng([1000 + config, index])
        curves, spec = seeded_loo_sweep(SPEC, effects(null_axes), max(seeds), rng, SWEEP_DRAW, spread)
        runs = [fit_curve(c, settings) for c in curves]
        for n in seeds:
            subset: List[RunFit] = [r for r in runs if r.seed < n]
            sub_spec = {**spec, "variants": [v for v in spec["variants"] if v["seed"] < n]}
            for row in compare(subset, {"loo": sub_spec}, settings):
                if row.kind != "loo" or row.variant == "base":
                    continue
                for rule, said in (("new", row.verdict), ("old", point_rule(row, settings.margin))):
                    c = counts[(n, rule)]
                    if row.variant.startswith("null"):
                        c["null"] += 1
                        c["false"] += said in FINDINGS
                    elif row.variant == "ceiling":
                        c["ceiling"] += 1
                        c["ceiling_found"] += said == LOWER_CEILING
                    else:
                        c["efficiency"] += 1
                        c["efficiency_found"] += said == LOWER_EFFICIENCY
                    c["unresolved"] += said == UNRESOLVED
                    if rule == "new":
                        axis = "null" if row.variant.startswith("null") else row.variant
                        c[(axis, outcome(row))] += 1
                    c["not_identified"] += said == UNRESOLVED and rule == "new" and row.reason == NOT_IDENTIFIED
                    c["rows"] += 1
    return counts


def rates(c: Counter) -> List[float]:
    def share(k: str, n: str) -> float:
        return c[k] / c[n] if c[n] else math.nan

    return [share("false", "null"), share("ceiling_found", "ceiling"), share("efficiency_found", "efficiency"),
            share("unresolved", "rows"), share("not_identified", "rows")]


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.1%}"


def _ratio(new: float, old: float) -> str:
    return "n/a" if math.isnan(new) or math.isnan(old) or old == 0 else f"{new / old:.2f}"


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")


def _commit() -> str:
    """HEAD, marked when rlscale/fit (the code under test) has uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "rlscale/fit"], capture_output=True, text=True,
                           cwd=root).stdout
    return head.strip() + (" + uncommitted changes in rlscale/fit" if dirty.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per noise model for coverage")
    parser.add_argument("--sweeps", type=int, default=20, help="LOO sweeps per seed spread")
    parser.add_argument("--null-axes", type=int, default=NULL_AXES)
    parser.add_argument("--n-boot", type=int, default=20, help="bootstrap resamples (B's interval only)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run (about a minute): 15 runs, 2 sweeps, 1 and 3 seeds")
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here (markdown)")
    args = parser.parse_args()
    seeds = (1, 3) if args.quick else SEEDS
    n_runs, n_sweeps = (15, 2) if args.quick else (args.runs, args.sweeps)
    settings = FitSettings(x="gpu_hours", n_boot=args.n_boot)
    settings.cutoff_rule = describe_rule(settings)
    commit = _commit()  # the code imported now, before the tree can change under a long run
    start = time.process_time()

    lines = ["## Coverage of the 95 % interval of A (single runs)", "",
             "| noise model | runs | identified | coverage, all | coverage, identified | mean error of A "
             "(identified) | sd of error | median half-width |", "|---|---|---|---|---|---|---|---|"]
    covered: Dict[str, float] = {}
    for case, (name, (draw, every)) in enumerate(COVERAGE.items()):
        c = coverage(case, draw, every, n_runs, settings)
        covered[name] = c.rate()
        lines.append(c.row(name))

    lines += ["", "## Short fits: the residual level pooled over a variant's seeds", "",
              f"Variants of {SHORT_SEEDS} seeds fitted as `rlscale fit` does (a fit of fewer than a dozen evals below "
              "its variant's pooled residual level is refitted at that level) and, as the baseline in the same run, "
              "each run alone.", "",
              "| noise model | runs | identified | coverage, all | coverage, identified | mean error of A "
              "(identified) | sd of error | median half-width |", "|---|---|---|---|---|---|---|---|"]
    for case, (name, (spec, draw, fraction, r0)) in enumerate(SHORT_FITS.items()):
        pooled, alone = short_fits(case, spec, draw, fraction, r0, max(1, n_runs // SHORT_SEEDS), settings)
        lines += [pooled.row(f"{name}: pooled"), alone.row(f"{name}: baseline, each run alone")]

    lines += ["", "## LOO verdicts", "",
              f"{n_sweeps} sweeps per seed spread, {args.null_axes} null axes each; evals every 250 GPU-hours, "
              "drift 0.01 (correlation 0.9), 400 samples per eval.", "",
              "| seed spread | seeds | rule | false verdicts on null axes | dA = -0.06 found | dB = -0.24 found "
              "| unresolved (all axes) | unresolved: A not identified |", "|---|---|---|---|---|---|---|---|"]
    ratios: List[str] = []
    breakdown: List[str] = []
    found: Dict[Tuple[str, int], List[float]] = {}
    for config, (name, spread) in enumerate(SPREADS.items()):
        counts = verdicts(config, spread, n_sweeps, seeds, args.null_axes, settings)
        for n in seeds:
            new, old = rates(counts[(n, "new")]), rates(counts[(n, "old")])
            found[(name, n)] = new
            for rule, values in (("verdicts (intervals)", new), ("baseline: point estimates", old[:4] + ["-"])):
                lines.append(f"| {name} | {n} | {rule} | " + " | ".join(_pct(v) if isinstance(v, float) else v
                                                                         for v in values) + " |")
            c = counts[(n, "new")]
            for axis, label in (("null", "null"), ("ceiling", "dA = -0.06"), ("efficiency", "dB = -0.24")):
                total = sum(c[(axis, o)] for o in OUTCOMES + ("unresolved, other",)) or 1
                breakdown.append(f"| {name} | {n} | {label} | " + " | ".join(f"{c[(axis, o)] / total:.0%}"
                                                                           for o in OUTCOMES) + " |")
            ratios.append(f"| {name} | {n} | " + " | ".join(_ratio(a, b) for a, b in zip(new[:3], old[:3])) + " |")
    lines += ["", "Verdicts (intervals) by axis: the share of rows with each outcome (a finding of any kind, within "
              "margin, or the reason left unresolved).", "",
              "| seed spread | seeds | axis | " + " | ".join(OUTCOMES) + " |", "|---|---|---|" + "---|" * len(OUTCOMES)]
    lines += breakdown
    lines += ["", "| seed spread | seeds | ratio new / baseline: false verdicts | dA found | dB found |",
              "|---|---|---|---|---|"] + ratios

    sd012 = next(iter(SPREADS))
    checks = [(f"coverage, {name}", covered[name], ">= 90 %", covered[name] >= 0.90) for name in ACCEPT_COVERAGE]
    checks += [(f"false verdicts, {n} seed(s), {sd012}", found[(sd012, n)][0], "<= 5 %", found[(sd012, n)][0] <= 0.05)
               for n in (1, 3) if (sd012, n) in found]
    if (sd012, 3) in found:
        checks.append((f"dA = -0.06 found, 3 seeds, {sd012}", found[(sd012, 3)][1], ">= 90 %",
                       found[(sd012, 3)][1] >= 0.90))
    lines += ["", "## Acceptance", "", "| check | value | target | met |", "|---|---|---|---|"]
    lines += [f"| {what} | {_pct(value)} | {target} | {'yes' if ok else '**no**'} |"
              for what, value, target, ok in checks]

    cpu = time.process_time() - start
    head = ["# verdict_bench: coverage of A's interval and LOO verdicts under drift, binomial and clustered "
            "eval noise and shared seed effects", "",
            f"{datetime.now(timezone.utc):%Y-%m-%d}, {_cpu_model()} ({platform.machine()}), commit {commit}; fast "
            f"method, --n-boot {args.n_boot}, {n_runs} runs per noise model, {n_sweeps} sweeps of "
            f"{args.null_axes + 3} variants x {max(seeds)} seeds per seed spread{' (--quick)' if args.quick else ''}; "
            f"process CPU {cpu:.0f} s.", ""]
    text = "\n".join(head + lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
