"""Coverage of A's interval on curves whose noise the independent-residual bootstrap got wrong: the true
reward drifts as AR(1) (correlation 0.9 between evals) under binomial evals, and runs stopped at 79 % of
their rise; and on a small eval set of prompts of different difficulty, whose offset every eval shares, in a
short run (9 evals, too few for a residual covariance) and a long one (30 evals). Known truth (Table 1's ScaleRL row, A 0.610); seeded, so the counts are fixed numbers that a
change to the statistics moves. bench/verdict_bench.py measures the same on more runs and more noise
models."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitSettings
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve, rise_x
from rlscale.fit.window import describe_rule

TRUE = TABLE1["scalerl"]
SETTINGS = FitSettings(x="gpu_hours", n_boot=0)
SETTINGS.cutoff_rule = describe_rule(SETTINGS)
RUNS = 60


def _coverage(draw: EvalDraw, seed: int):
    rng = np.random.default_rng(seed)
    fits = [fit_curve(drawn_curve(TRUE, draw, rng, seed=i), SETTINGS) for i in range(RUNS)]
    covered = np.array([f.A_lo <= TRUE.A <= f.A_hi for f in fits])
    identified = np.array([bool(f.A_identified) for f in fits])
    return covered, identified


@pytest.mark.parametrize("draw", [EvalDraw(samples=400, drift_sd=0.01), EvalDraw(samples=16000, drift_sd=0.005)],
                         ids=["drift 0.01, 400 samples", "drift 0.005, 16,000 samples"])
def test_a_interval_covers_the_truth_on_drifting_rewards(draw):
    covered, identified = _coverage(draw, seed=11)
    # the independent-residual bootstrap covered 56-80 % here; 60 runs at a true 95 % cover >= 90 % with
    # probability 0.94, so a rate below 0.88 is a real regression, not a draw
    assert covered.mean() >= 0.88, covered.mean()
    # the drift floor (rlscale.fit.correlated.prior_inflation) and the bend's place (a bend the data allow in
    # the last half of the evals, rlscale.fit.one_run) leave a share of these runs unidentified: 38 of 60 at
    # 400 samples (45 without the bend's place)
    assert covered[identified].mean() >= 0.88 and identified.mean() >= 0.6


def test_a_stopped_before_saturation_is_reported_with_an_honest_interval():
    x_max = rise_x(TRUE, 0.79)
    covered, identified = _coverage(EvalDraw(samples=400, every=x_max / 40, x_max=x_max), seed=12)
    assert covered.mean() >= 0.9
    if identified.any():  # the runs called identified are not the low draws' club
        assert covered[identified].mean() >= 0.85


SMALL_EVAL_SET = EvalDraw(prompts=100, per_prompt=4, prompt_sd=2.5, drift_sd=0.02)


def test_a_short_run_on_a_small_eval_set_holds_the_population_a():
    # 9 evals: the eval set's offset used to be left out of A's interval below a dozen evals (66 % held A); with
    # too few evals to tell a drift from a plateau A is not identified, and its interval still holds the truth
    covered, identified = _coverage(replace(SMALL_EVAL_SET, every=16000 / 9), seed=13)
    assert covered.mean() >= 0.88 and not identified.any(), (covered.mean(), identified.mean())


def test_the_eval_sets_offset_shifts_a_without_unbounding_it():
    # 30 evals: the offset used to be amplified through the profile to the edge of A's range (none identified)
    covered, identified = _coverage(replace(SMALL_EVAL_SET, every=16000 / 30), seed=14)
    assert covered.mean() >= 0.88 and identified.mean() >= 0.6, (covered.mean(), identified.mean())
