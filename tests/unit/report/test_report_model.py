"""What the report reads: every run once (fitted, unfitted, folder missing), metrics tolerated as they come,
the same result read in parallel, the Figure-7 transform of the paper, and number formatting."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlscale.fit.schema import FITS_JSON, FitResults, RunFit
from rlscale.report.curves import linearize, sigmoid
from rlscale.report.formatting import ci, num
from rlscale.report.model import TRUNCATION_FLAG, Series, load_report
from rlscale.report.summary import summarize
from rlscale.report.synthetic import XSS_NAME, synthetic_plan, write_results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("model") / "results"
    plan = synthetic_plan(n_runs=12, n_sweeps=2, n_loo_sweeps=1, edge_cases=True)
    return root, plan, write_results(root, plan, n_train=30)


def test_every_run_appears_once_with_its_state_and_fit(results):
    root, plan, fits = results
    report = load_report(root, fits)
    assert sorted((r.sweep, r.name) for r in report.runs) == sorted((p.sweep, p.variant) for p in plan)
    by_name = {r.name: r for r in report.runs}
    assert by_name["oom"].state == "failed" and by_name["oom"].reason == "CUDA out of memory at step 12"
    assert not by_name["few-points"].fit_ok
    assert by_name["few-points"].fit_message == "too_few_points: 2 eval points after the cutoff (need 4)"
    assert by_name[XSS_NAME].path.name != XSS_NAME and by_name[XSS_NAME].fit_ok
    assert by_name["diverged"].truncation_flagged and by_name["diverged"].peak("truncation_rate") > TRUNCATION_FLAG
    assert set(by_name["scalerl"].train) == {"truncation_rate", "entropy", "kept_prompt_fraction", "lag_mean",
                                             "lag_max", "samples_per_s", "tokens_per_s"}
    ranked = report.sweeps[1].runs  # loo-0, in the fitter's ranking order, unranked runs last
    ranks = [report.sweeps[1].rank_of(r).rank for r in ranked if report.sweeps[1].rank_of(r)]
    assert ranks == sorted(ranks) and not ranked[-1].fit_ok


def test_summary_names_the_best_variants(results):
    root, _, fits = results
    summaries = {s.name: s for s in summarize(load_report(root, fits))}
    loo = summaries["loo-0"]
    ok = [f for f in fits.runs if f.sweep == "loo-0" and f.status == "ok"]
    assert loo.best_A.name == max(ok, key=lambda f: f.A).variant
    assert loo.best_B.name == max(ok, key=lambda f: f.B).variant
    assert (loo.n_runs, loo.n_planned, loo.n_fit_ok) == (6, 6, len(ok))
    assert loo.states == {"diverged": 1, "done": 4, "failed": 1} and loo.n_truncation_flagged == 1


def test_unfitted_runs_and_fits_without_folder_still_appear(results, tmp_path):
    root, _, fits = results
    orphan = RunFit(sweep="gone", variant="moved-away", run_path="/nowhere/moved-away", status="ok", A=0.6,
                    B=2.0, C_mid=3000.0, R0=0.2, points_x=[100.0, 200.0], points_y=[0.2, 0.25])
    partial = FitResults(fits.settings, [orphan] + fits.runs[1:], fits.comparison)
    report = load_report(root, partial)
    names = {r.name: r for r in report.runs}
    assert names["moved-away"].reason == "run folder not found" and list(names["moved-away"].eval.x) == [100, 200]
    skipped = fits.runs[0]
    assert names[skipped.variant].fit is None and names[skipped.variant].fit_message == "not fitted"


def test_fits_made_from_another_directory_find_their_folders(results):
    root, _, fits = results
    moved = FitResults.from_json(fits.to_json())
    for fit in moved.runs:
        fit.run_path = f"/elsewhere/results/{fit.run_path}"
    report = load_report(root, moved)
    assert all(run.path is not None for run in report.runs)


def test_metrics_with_missing_or_odd_values_are_tolerated(tmp_path):
    run = tmp_path / "results" / "sweep" / "odd"
    run.mkdir(parents=True)
    lines = [{"step": 1, "kind": "train", "gpu_hours": 1.0, "entropy": "high", "truncation_rate": None},
             {"step": 2, "kind": "train", "gpu_hours": 2.0, "entropy": 0.5},
             {"step": 2, "kind": "eval", "gpu_hours": 2.0, "val_reward": float("nan")},
             {"step": 3, "kind": "eval", "gpu_hours": 3.0, "val_reward": 0.3}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"step": 4, "ki')
    report = load_report(tmp_path / "results", FitResults.from_json("{}"))
    view = report.runs[0]
    assert (view.state, view.fit_message, view.config_text) == ("pending", "not fitted", "")
    assert list(view.eval.x) == [3.0] and list(view.train["entropy"].y) == [0.5]
    assert "truncation_rate" not in view.train and view.last("entropy") == 0.5
    assert any("torn" in w for w in report.warnings) and any("config.yaml" in w for w in report.warnings)


def test_series_keep_finite_pairs_only():
    series = Series.of([(1, 0.1), (2, None), ("x", 0.3), (4, float("inf")), (5, [1])])
    assert list(series.x) == [1.0] and list(series.y) == [0.1]
    assert len(Series.of([]).x) == 0


def test_parallel_read_matches_serial(results):
    root, _, fits = results
    serial, parallel = load_report(root, fits, 1), load_report(root, fits, 2)
    assert [(r.anchor, r.name, r.state) for r in serial.runs] == [(r.anchor, r.name, r.state) for r in parallel.runs]
    assert all(np.array_equal(a.eval.y, b.eval.y) for a, b in zip(serial.runs, parallel.runs))


def test_figure7_transform_is_C_to_the_B_on_the_curve():
    """ScaleRL App. A.7: F(R_C) = C_mid^B / ((A - R0)/(R_C - R0) - 1) = C^B on Eq. 1 (slope B in log-log)."""
    c = np.geomspace(100, 40000, 30)
    r = sigmoid(c, A=0.61, B=1.92, C_mid=2542, R0=0.2)  # Table 1, ScaleRL
    cs, f = linearize(c, r, A=0.61, B=1.92, C_mid=2542, R0=0.2)
    np.testing.assert_allclose(f, c ** 1.92, rtol=1e-6)
    assert len(linearize(c, np.full_like(c, 0.7), 0.61, 1.92, 2542, 0.2)[0]) == 0  # above A: undefined


def test_numbers_are_formatted_for_readers():
    assert (num(None), num(float("nan")), num(0.61234), num(1.9, 2)) == ("\u2014", "\u2014", "0.612", "1.90")
    assert (num(16000, 0), num(2.5e21, 0), num(-0.0004)) == ("16,000", "2.5e+21", "0.000")
    assert (ci(0.6, 0.62), ci(None, 0.62)) == ("[0.600, 0.620]", "")


def test_a_fits_json_without_runs_reads_as_empty(tmp_path):
    (tmp_path / FITS_JSON).write_text(FitResults.from_json("{}").to_json())
    assert load_report(tmp_path, FitResults.load(tmp_path / FITS_JSON)).sweeps == []
