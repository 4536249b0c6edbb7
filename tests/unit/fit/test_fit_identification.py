"""A identified only where the data place the bend before the last half of the fitted evals
(rlscale.fit.one_run, rlscale.fit.profile.bend_excluded_from). Runs stopped at 30-50 % of their rise (Table 1's
ScaleRL row, A 0.610; an AR(1) drift of sd 0.01, correlation 0.9 between evals; 400 samples per eval) whose
last evals the drift flattened: their point estimate bends before the last fitted point and their interval
closes below the true A, so the point estimate's bend alone called them identified. The draws are
bench/verdict_bench.py's (seeded by case name and run index), so the numbers are fixed."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from rlscale.fit.correlated import MIN_DEGREES
from rlscale.fit.forms import SigmoidParams
from rlscale.fit.one_run import LATE_BEND, PAST_BEND_SHARE, fit_curve, window_points
from rlscale.fit.profile import bend_excluded_from
from rlscale.fit.results import FitSettings
from rlscale.fit.space import search_space
from rlscale.fit.window import describe_rule
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve, rise_x

TRUE = TABLE1["scalerl"]
SETTINGS = FitSettings(x="gpu_hours", n_boot=0)
SETTINGS.cutoff_rule = describe_rule(SETTINGS)


def _early(fraction: float, evals: int, index: int):
    x_max = rise_x(TRUE, fraction)
    name = f"stopped at {fraction:.0%} of the rise, {evals} evals, drift 0.01, 400 samples".replace("%", " %")
    draw = EvalDraw(samples=400, drift_sd=0.01, x_max=x_max, every=x_max / (evals - 1))
    return fit_curve(drawn_curve(TRUE, draw, np.random.default_rng([zlib.crc32(name.encode()), index])), SETTINGS)


# (fraction of the rise, evals, run index, A, upper end of A's interval) of runs the point estimate's bend
# called identified
EARLY = [(0.3, 64, 28, 0.389, 0.423), (0.4, 16, 151, 0.414, 0.487), (0.5, 30, 88, 0.444, 0.547),
         (0.5, 16, 749, 0.474, 0.643)]


@pytest.mark.parametrize("fraction, evals, index, a, a_hi", EARLY,
                         ids=[f"{f:.0%} of the rise, {n} evals, run {i}" for f, n, i, _, _ in EARLY])
def test_a_run_stopped_before_its_bend_is_not_identified(fraction, evals, index, a, a_hi):
    run = _early(fraction, evals, index)
    x = np.asarray(run.points_x)
    past = max(MIN_DEGREES, int(np.ceil(PAST_BEND_SHARE * run.n_points)))
    # its own fit has bent and its interval is closed, 0.06-0.19 below the true A (the last run's holds it)
    assert run.C_mid < x[-1] and run.A == pytest.approx(a, abs=5e-4) and run.A_hi == pytest.approx(a_hi, abs=5e-4)
    assert run.A_identified is False and run.A_interval_open is False
    assert run.A_identified_reason.startswith(f"{LATE_BEND} {past} of its {run.n_points} fitted evals")


def test_a_run_past_its_bend_is_identified_and_its_bend_placed_early():
    # a run to 16k GPU-hours (97 % of its rise), evals every 250: the data exclude every bend after 8k
    draw = EvalDraw(samples=400, drift_sd=0.01)
    run = fit_curve(drawn_curve(TRUE, draw, np.random.default_rng([zlib.crc32(b"drift 0.01, 400 samples"), 1])),
                    SETTINGS)
    assert run.A_identified is True and run.A_lo <= TRUE.A <= run.A_hi, (run.A_identified_reason, run.A_lo, run.A_hi)
    x, y, window = window_points(run, SETTINGS)
    space = search_space(SETTINGS, window)
    point = SigmoidParams(A=run.A, B=run.B, C_mid=run.C_mid, sse=run.sse)
    assert bend_excluded_from(x, y, run.R0, space, point, run.A_inflation, 0.95, 8000.0)
    assert not bend_excluded_from(x, y, run.R0, space, point, run.A_inflation, 0.95, 2000.0)

