"""What the report reads: every run once (fitted, unfitted, folder missing), metrics tolerated as they come,
the same result read in parallel, the Figure-7 transform of the paper, and number formatting."""
from __future__ import annotations

import json
from typing import Optional

import numpy as np
import pytest

from rlscale.fit.results import FITS_JSON, ComparisonRow, FitResults, RunFit
from rlscale.report.curves import log_linearize, sigmoid
from rlscale.report.formatting import ci, num
from rlscale.report.content import TRUNCATION_FLAG, Series, load_report
from rlscale.report.summary import summarize
from rlscale.testing.results_tree import XSS_NAME, synthetic_plan, write_results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("model") / "results"
    plan = synthetic_plan(n_runs=12, n_sweeps=2, n_loo_sweeps=1, edge_cases=True)
    return root, plan, write_results(root, plan, n_train=60)  # the diverged run's truncation rises over 20+ steps


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


def test_truncation_alarms_read_train_lines_after_step_0(tmp_path):
    """The paper's 10 % instability line (Section 2) is about training: a step-0 line (the untrained model)
    and the eval lines never raise the alarm; train lines after step 0 whose 20-step mean rises back above it
    do, a steady high rate does not (rlscale.runfolder.truncation)."""
    def run(name, lines):
        folder = tmp_path / "results" / "sweep" / name
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    untrained = [{"step": 0, "kind": "train", "gpu_hours": 0.0, "truncation_rate": 0.6},
                 {"step": 0, "kind": "eval", "gpu_hours": 0.0, "val_reward": 0.2, "truncation_rate": 0.7,
                  "val_truncation_rate": 0.7}]
    trained = [{"step": s, "kind": "train", "gpu_hours": float(s), "truncation_rate": 0.04} for s in range(1, 21)]
    rising = [{"step": s, "kind": "train", "gpu_hours": float(s), "truncation_rate": 0.2} for s in range(21, 31)]
    steady = [{"step": s, "kind": "train", "gpu_hours": float(s), "truncation_rate": 0.3} for s in range(1, 31)]
    run("calm", untrained + trained)
    run("unstable", untrained + trained + rising)
    run("steady", steady)
    runs = {r.name: r for r in load_report(tmp_path / "results", FitResults.from_json("{}")).runs}
    assert not runs["calm"].truncation_flagged and runs["calm"].peak("truncation_rate") == 0.04
    assert list(runs["calm"].train["truncation_rate"].x) == [float(s) for s in range(1, 21)]
    assert runs["unstable"].truncation_flagged and runs["unstable"].peak("truncation_rate") == 0.2
    assert not runs["steady"].truncation_flagged  # high by design, not rising: no signal


def test_a_variants_seeds_fold_into_one_entry(tmp_path):
    """The ranking reads one entry per variant: its seeds' runs, the fitter's rank row once, seed means."""
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=4, n_sweeps=1, edge_cases=False, seeds=3), n_train=5)
    sweep = load_report(root, fits).sweeps[0]
    assert len(sweep.runs) == 12 and len(sweep.variants) == 4
    for v in sweep.variants:
        seeds = [f for f in fits.runs if f.variant == v.variant]
        assert [r.seed_label for r in v.runs] == ["s0", "s1", "s2"] and v.states == {"done": 3}
        assert v.row.variant == v.variant and v.row.kind == "rank"
        assert v.mean("A") == pytest.approx(np.mean([f.A for f in seeds]))
        assert v.spread("A") == pytest.approx(np.std([f.A for f in seeds], ddof=1))
    assert [v.row.rank for v in sweep.variants] == sorted(v.row.rank for v in sweep.variants)


def test_a_comparison_rows_further_fields_are_shown_by_name():
    """Fields the tables have no column for reach the row's note by name; unset ones are left out."""
    from dataclasses import dataclass

    from rlscale.report.ranking import details

    @dataclass
    class Row(ComparisonRow):
        pairing: str = ""
        share: Optional[float] = None

    assert details(Row(kind="rank", sweep="s", variant="v", rank=1, note="n", pairing="paired n=3",
                       share=0.25)) == "pairing paired n=3, share 0.250"
    assert details(Row(kind="rank", sweep="s", variant="v", rank=1, dA=0.01)) == "" and details(None) == ""


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
    cs, log_f = log_linearize(c, r, A=0.61, B=1.92, C_mid=2542, R0=0.2)
    np.testing.assert_allclose(log_f, 1.92 * np.log10(c), rtol=1e-6)
    flops = c * 3.6e18  # C^B ~ 1e80: finite in logs
    np.testing.assert_allclose(log_linearize(flops, r, 0.61, 1.92, 2542 * 3.6e18, 0.2)[1], 1.92 * np.log10(flops))
    for outside in (0.7, 0.61, 0.2, 0.1):  # at or above A, at or below R0: undefined
        assert len(log_linearize(c, np.full_like(c, outside), 0.61, 1.92, 2542, 0.2)[0]) == 0


def test_numbers_are_formatted_for_readers():
    assert (num(None), num(float("nan")), num(0.61234), num(1.9, 2)) == ("\u2014", "\u2014", "0.612", "1.90")
    assert (num(16000, 0), num(2.5e21, 0), num(-0.0004)) == ("16,000", "2.5e+21", "0.000")
    assert (ci(0.6, 0.62), ci(None, 0.62)) == ("[0.600, 0.620]", "")


def test_a_fits_json_without_runs_reads_as_empty(tmp_path):
    (tmp_path / FITS_JSON).write_text(FitResults.from_json("{}").to_json())
    assert load_report(tmp_path, FitResults.load(tmp_path / FITS_JSON)).sweeps == []
