"""One run's intervals: none below five points, the eval set's offset widening A's interval without deciding
whether A is bounded, bootstrap draws that depend on the points, not on the run's name, and are the same drawn
in chunks; long windows fitted on group means."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rlscale.fit import bootstrap
from rlscale.fit.binning import binned
from rlscale.fit.curves import Curve
from rlscale.fit.one_run import MIN_INTERVAL_POINTS, fit_curve
from rlscale.fit.results import FitSettings
from rlscale.fit.window import describe_rule
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve

SETTINGS = FitSettings(x="gpu_hours", n_boot=20, min_compute=1.0)
SETTINGS.cutoff_rule = describe_rule(SETTINGS)
TRUE = TABLE1["scalerl"]


def _curve(n_points: int, name: str = "run") -> Curve:
    """Evals at x = 0 and ``n_points`` more, with noise, as a trainer writes them."""
    draw = EvalDraw(samples=400, every=16000.0 / n_points)
    return replace(drawn_curve(TRUE, draw, np.random.default_rng(3), variant=name), sweep="s")


@pytest.mark.parametrize("n_points", [3, 4])
def test_a_fit_of_too_few_points_has_no_interval_and_no_identified_a(n_points):
    run = fit_curve(_curve(n_points), SETTINGS)
    assert run.status == "ok" and run.n_points == n_points and run.A is not None
    assert run.A_lo is None and run.A_hi is None and run.A_se is None
    assert run.A_identified is False and "too few to measure the noise" in run.A_identified_reason
    assert not run.A_interval_open


def test_five_points_get_an_interval():
    run = fit_curve(_curve(MIN_INTERVAL_POINTS), SETTINGS)
    assert run.n_points == MIN_INTERVAL_POINTS and run.A_lo < run.A < run.A_hi


def test_the_eval_sets_offset_widens_a_in_quadrature_and_leaves_identification_to_the_residuals():
    curve = _curve(30)
    # two eval SEs above the residual sd: the white noise is the residuals' in both, the rest a shared offset
    small, large = (fit_curve(replace(curve, se=np.full_like(curve.se, se)), SETTINGS) for se in (0.05, 0.08))
    assert small.A == large.A and small.A_identified and large.A_identified
    assert small.noise_white_sd == large.noise_white_sd < 0.05
    assert small.A_se_within == large.A_se_within < small.A_se < large.A_se
    # each side: hypot(the residuals' half-width, 1.96 x the offset's sd); the residuals' half-width is one
    z = 1.959964
    for run, se in ((small, 0.05), (large, 0.08)):
        half = z * np.sqrt(se ** 2 - run.noise_white_sd ** 2)
        upper, lower = np.sqrt((run.A_hi - run.A) ** 2 - half ** 2), np.sqrt((run.A - run.A_lo) ** 2 - half ** 2)
        assert upper + lower == pytest.approx(2 * z * small.A_se_within, rel=1e-4)


def test_the_same_points_get_the_same_intervals_under_any_name():
    one, other = fit_curve(_curve(12, "one"), SETTINGS), fit_curve(_curve(12, "other"), SETTINGS)
    assert (one.B_lo, one.B_hi, one.C_mid_lo, one.C_mid_hi) == (other.B_lo, other.B_hi, other.C_mid_lo, other.C_mid_hi)
    moved = _curve(12)
    moved = replace(moved, y=moved.y + np.where(np.arange(moved.y.size) == 5, 1e-3, 0.0))
    assert fit_curve(moved, SETTINGS).B_lo != one.B_lo  # the draws follow the points


def test_a_long_window_is_fitted_on_group_means():
    x, y = np.arange(1.0, 1002.0), np.arange(1001.0) % 7
    bx, by = binned(x, y, max_points=500)
    assert bx.size == by.size == 500
    assert (bx[0], by[0]) == (2.0, 1.0)  # the first group is one longer: x 1, 2, 3 and y 0, 1, 2
    assert (bx[1], by[1]) == (4.5, 3.5)  # x 4, 5 and y 3, 4
    assert (bx[-1], by[-1]) == (1000.5, 5.5)  # x 1000, 1001 and y 999 % 7 = 5, 1000 % 7 = 6
    assert np.sum(bx * np.r_[3, np.full(499, 2)]) == pytest.approx(np.sum(x))
    short = binned(x[:500], y[:500], max_points=500)
    assert short[0] is not None and np.array_equal(short[0], x[:500]) and np.array_equal(short[1], y[:500])


def test_the_bootstrap_in_chunks_draws_and_refits_as_in_one(monkeypatch):
    curve = _curve(30)
    whole = fit_curve(curve, replace(SETTINGS, n_boot=60))
    monkeypatch.setattr(bootstrap, "BOOT_CHUNK", 7)
    chunked = fit_curve(curve, replace(SETTINGS, n_boot=60))
    assert (chunked.B_lo, chunked.B_hi, chunked.C_mid_lo, chunked.C_mid_hi) == \
        (whole.B_lo, whole.B_hi, whole.C_mid_lo, whole.C_mid_hi)
