"""Short fits take their noise from their variant's seeds: the pooled ratio of residual variance to squared eval SE,
by hand; a floor that raises a lucky-quiet run's variance and leaves a noisy one alone; and, on the
committed SmolLM2 runs fitted on their first quarter (six evals, some at the foot of a rise to about 0.44),
no ceiling called at the foot of the rise."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rlscale.fit.api import fit_results
from rlscale.fit.pooled import below_pooled, pooled_ratios
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitSettings, RunFit
from rlscale.fit.window import describe_rule
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve

SUMS_SCALE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "smollm2-sums-scale"


def _run(variant: str, sse: float, n_points: int, eval_se: float) -> RunFit:
    return RunFit(sweep="s", variant=variant, status="ok", sse=sse, n_points=n_points, eval_se=eval_se)


def test_the_pooled_ratio_sums_squares_over_degrees_of_freedom_times_eval_variance():
    runs = [_run("a", 3e-4, 6, 0.01), _run("a", 1e-4, 9, 0.02), _run("b", 2e-4, 5, 0.01),
            _run("b", 1.0, 3, 0.01),  # no residual degree of freedom: not pooled
            replace(_run("b", 1.0, 8, 0.01), status="flat")]  # not fitted: not pooled
    ratios = pooled_ratios(runs)
    assert ratios[("s", "a")] == pytest.approx((3e-4 + 1e-4) / (3 * 0.01 ** 2 + 6 * 0.02 ** 2))
    assert ratios[("s", "b")] == pytest.approx(2e-4 / (2 * 0.01 ** 2))
    assert below_pooled(runs[0], 2.0) and not below_pooled(runs[0], 0.5)  # 1e-4 / 1e-4 = 1
    assert not below_pooled(_run("a", 1e-9, 14, 0.01), 2.0)  # eleven degrees of freedom: its own estimate


def test_the_floor_raises_a_quiet_short_fit_and_leaves_a_noisy_one():
    settings = FitSettings(x="gpu_hours", n_boot=0)
    settings.cutoff_rule = describe_rule(settings)
    curve = drawn_curve(TABLE1["scalerl"], EvalDraw(samples=4000, every=16000 / 12), np.random.default_rng(7))
    own = fit_curve(curve, settings)
    s2 = own.sse / (own.n_points - 3)
    quiet = fit_curve(replace(curve, se=np.full_like(curve.se, np.sqrt(4 * s2))), settings, pooled_ratio=1.0)
    assert quiet.A_inflation == pytest.approx(4.0, rel=1e-6) and "pooled level" in quiet.message
    assert quiet.A_se_within > 1.3 * own.A_se_within  # the bound scales with the variance, the profile is not linear
    noisy = fit_curve(replace(curve, se=np.full_like(curve.se, np.sqrt(s2 / 4))), settings, pooled_ratio=1.0)
    # the noisy fit keeps its own variance: only the drift floor (rlscale.fit.correlated.prior_inflation) widens it
    assert 1.0 <= noisy.A_inflation < quiet.A_inflation and "pooled level" not in noisy.message


def test_first_quarter_fits_of_real_runs_call_no_ceiling_at_the_foot_of_the_rise():
    early = fit_results(SUMS_SCALE, FitSettings(x="flops", n_boot=0, fit_until_frac=0.25))
    full = {(r["variant"], r["seed"]): r for r in json.loads((SUMS_SCALE / "fits.json").read_text())["runs"]}
    reached = {key: float(np.mean(run["points_y"][-3:])) for key, run in full.items()}
    identified = [r for r in early.runs if r.A_identified]
    # six evals at the foot of a rise that quiet residuals bent early were called A 0.05-0.07, identified; with
    # too few evals to tell a drift from a plateau, no first-quarter fit calls a ceiling
    assert len(early.runs) == 15 and not identified
    assert any("too few to tell a drift" in r.A_identified_reason for r in early.runs if r.fitted)
    foot = [r for r in early.runs if r.A < 0.1]
    assert foot and all(r.A < reached[(r.variant, r.seed)] for r in foot)


def test_the_planners_draws_of_one_run_are_the_draws_behind_its_own_interval():
    """A one-seed variant's prediction interval (rlscale.fit.predict) is drawn from the run's own bootstrap:
    with the pooled floor raising a quiet short fit's noise fourfold, its percentiles (where the curve is) lie
    inside the run's own prediction interval (where an eval lands, rlscale.fit.forecast), and a run fitted
    without intervals gives no draws."""
    from rlscale.fit.predict import prediction_draws

    at = 30000.0
    settings = FitSettings(x="gpu_hours", n_boot=200, predict_at=[at])
    settings.cutoff_rule = describe_rule(settings)
    curve = drawn_curve(TABLE1["scalerl"], EvalDraw(samples=4000, every=16000 / 12), np.random.default_rng(7))
    own = fit_curve(curve, replace(settings, n_boot=0))
    s2 = own.sse / (own.n_points - 3)
    quiet = fit_curve(replace(curve, se=np.full_like(curve.se, np.sqrt(4 * s2))), settings, pooled_ratio=1.0)
    assert quiet.A_inflation == pytest.approx(4.0, rel=1e-6)
    draws = prediction_draws(quiet, settings, at)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    assert quiet.predictions[0].lo < lo < hi < quiet.predictions[0].hi
    n = curve.x.size
    arrays = {k: v[:5] for k, v in vars(curve).items() if isinstance(v, np.ndarray) and v.size == n}
    short = fit_curve(replace(curve, **arrays), settings)  # step 0 and four evals: four fitted, no intervals
    assert short.noise_white_sd is None and prediction_draws(short, settings, at) is None
