"""Prediction intervals of an extrapolated reward and the two baselines (rlscale.fit.forecast): coverage on
synthetic drifting runs with known truth, the carry-forward mean, the best method, the fits.csv columns."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from rlscale.fit.api import fit_results, write_outputs
from rlscale.fit.forecast import CARRY_FORWARD, POWER_LAW, SIGMOID, WITHIN_NOISE, best_method, summarize
from rlscale.fit.one_run import fit_curve, window_points
from rlscale.fit.results import FitSettings, RunFit
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve, synthetic_curve, write_run


def _drifting_runs(n: int, draw: EvalDraw, settings: FitSettings):
    rng = np.random.default_rng(3)
    specs = list(TABLE1.values())
    return [fit_curve(drawn_curve(specs[i % len(specs)], draw, rng), settings) for i in range(n)]


@pytest.mark.parametrize("draw, n", [
    (EvalDraw(samples=1000, drift_sd=0.02, drift_phi=0.95, every=500), 100),  # a strong slow drift, REML-estimated
    (EvalDraw(samples=400, drift_sd=0.01, drift_phi=0.9, every=1000), 50),  # a fit too short to estimate it
    (EvalDraw(prompts=200, per_prompt=2, drift_sd=0.01, every=500), 50),  # a fixed eval set of clustered prompts
], ids=["drift", "short", "clustered"])
def test_the_prediction_interval_of_the_held_out_mean_covers_on_drifting_runs(draw, n):
    runs = _drifting_runs(n, draw, FitSettings(x="gpu_hours", fit_until_frac=0.5, n_boot=60))
    checked = [r for r in runs if r.extrap_lo is not None]
    assert len(checked) >= 0.9 * n
    assert sum(r.extrap_covered for r in checked) >= 0.9 * len(checked)
    assert all(r.extrap_lo < r.extrap_predicted + r.extrap_drift < r.extrap_hi for r in checked)
    summary = summarize(checked, 0.95)
    assert summary.n == len(checked) and summary.covered == sum(r.extrap_covered for r in checked)


def test_a_short_fit_gets_the_conservative_drift_and_a_long_one_its_estimate():
    short, = _drifting_runs(1, EvalDraw(samples=400, drift_sd=0.01, every=1000), FitSettings(
        x="gpu_hours", fit_until_frac=0.5, n_boot=0))
    long, = _drifting_runs(1, EvalDraw(samples=400, drift_sd=0.01, every=250), FitSettings(
        x="gpu_hours", fit_until_frac=0.5, n_boot=0))
    assert (short.extrap_noise_rule, long.extrap_noise_rule) == ("conservative", "estimated")
    assert short.noise_phi == 0.0 and short.extrap_lo < short.extrap_hi  # the delta method at --n-boot 0


def test_carry_forward_is_the_mean_of_the_last_three_fitted_evals():
    settings = FitSettings(x="gpu_hours", fit_until_frac=0.5, n_boot=40)
    run, = _drifting_runs(1, EvalDraw(samples=400, drift_sd=0.01), settings)
    _, y, _ = window_points(run, settings)
    assert run.extrap_cf_predicted == pytest.approx(np.mean(y[-3:]), abs=1e-12)
    assert run.extrap_cf_abs_err == pytest.approx(abs(np.mean(y[-3:]) - run.extrap_observed), abs=1e-12)
    assert run.extrap_cf_lo < run.extrap_cf_predicted < run.extrap_cf_hi


def test_the_best_method_is_the_nearest_and_within_noise_when_the_evals_cannot_tell():
    predictions = {SIGMOID: 0.50, CARRY_FORWARD: 0.40, POWER_LAW: 0.58}
    best = best_method(0.52, predictions, observed_sd=0.005, level=0.95)
    assert (best.method, best.runner_up, best.resolved, best.describe()) == (SIGMOID, POWER_LAW, True, SIGMOID)
    close = best_method(0.545, predictions, observed_sd=0.005, level=0.95)  # 0.005 from the midpoint 0.54
    assert (close.method, close.resolved) == (POWER_LAW, False)
    assert close.describe() == f"{POWER_LAW} ({SIGMOID} {WITHIN_NOISE})"
    assert best_method(0.52, {SIGMOID: None, POWER_LAW: 0.6}, 0.005, 0.95).describe() == POWER_LAW


def test_fits_csv_has_the_forecast_columns(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "results"
    for seed in (0, 1):
        x, y = synthetic_curve(TABLE1["scalerl"], 30, 0.01, rng)
        write_run(root / "sweep" / f"scalerl_s{seed}", x, y, seed=seed)
    results = fit_results(root, FitSettings(x="gpu_hours", fit_until_frac=0.5, n_boot=20, predict_at=[20000.0]))
    write_outputs(results, tmp_path)
    rows = list(csv.DictReader(open(tmp_path / "fits.csv")))
    new = ["extrap_lo", "extrap_hi", "extrap_covered", "extrap_drift", "extrap_noise_rule", "extrap_cf_predicted",
           "extrap_cf_lo", "extrap_cf_hi", "extrap_cf_abs_err", "extrap_pl_predicted", "extrap_best",
           "extrap_runner_up", "extrap_best_resolved"]
    assert set(new) <= set(RunFit.CSV_COLUMNS) and set(new) <= set(rows[0])
    for row, run in zip(rows, results.runs):
        assert float(row["extrap_lo"]) < float(row["extrap_observed"]) < float(row["extrap_hi"])
        assert row["extrap_best"] in (SIGMOID, CARRY_FORWARD, POWER_LAW)
        p = run.predictions[0]
        assert p.lo < p.y < p.hi  # a prediction interval at --predict-at
