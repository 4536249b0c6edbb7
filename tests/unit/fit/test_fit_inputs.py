"""Bad input never stops ``rlscale fit``: every case below gets its status and a one-line message while
the good run beside it still fits; sources other than a results folder (tidy CSV and
parquet, per-task metrics)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlscale.fit.api import MetricError, SourceError, fit_results
from rlscale.fit.forms import sigmoid
from rlscale.fit.results import FitSettings
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

SETTINGS = FitSettings(n_boot=10)
X = np.linspace(0, 16000, 41)


def _evals(path: Path, ys, xs=X, extra_lines=(), config="seed: 0\n"):
    path.mkdir(parents=True)
    if config is not None:
        (path / "config.yaml").write_text(config)
    lines = [json.dumps({"step": i, "kind": "eval", "gpu_hours": float(x), "val_reward": float(y)})
             for i, (x, y) in enumerate(zip(xs, ys))]
    (path / "metrics.jsonl").write_text("\n".join(lines + list(extra_lines)) + ("\n" if lines or extra_lines else ""))


def _good_y(seed=0):
    return synthetic_curve(TABLE1["scalerl"], 40, 0.01, np.random.default_rng(seed))[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad") / "results"
    sweep = root / "sw"
    x, y = synthetic_curve(TABLE1["scalerl"], 40, 0.01, np.random.default_rng(0))
    write_run(sweep / "good", x, y, seed=0)
    _evals(sweep / "too_few", [0.3, 0.5, 0.6], xs=[0.0, 10000.0, 16000.0])
    _evals(sweep / "constant", [0.3] * X.size)
    _evals(sweep / "decreasing", sigmoid(X, 0.6, 0.2, 2.0, 3000.0))
    y_nan = _good_y(1).copy()
    y_nan[[5, 9, 20]] = [math.nan, math.inf, -math.inf]
    _evals(sweep / "some_nan", y_nan)
    _evals(sweep / "all_nan", [math.nan] * X.size)
    _evals(sweep / "torn", _good_y(2), extra_lines=['{"step": 41, "kind": "ev'])
    resumed = _good_y(3)
    replay = [json.dumps({"step": i, "kind": "eval", "gpu_hours": float(X[i]), "val_reward": float(resumed[i]) + 0.05})
              for i in range(10, 16)]
    _evals(sweep / "resumed", resumed, extra_lines=replay)
    _evals(sweep / "noconf_s3", _good_y(4), config=None)
    _evals(sweep / "badconf", _good_y(5), config="seed: [unclosed\n  - :")
    _evals(sweep / "empty", [])
    (sweep / "train_only").mkdir()
    (sweep / "train_only" / "metrics.jsonl").write_text(json.dumps({"step": 0, "kind": "train", "reward": 0.1}) + "\n")
    (sweep / "garbage").mkdir()
    (sweep / "garbage" / "metrics.jsonl").write_bytes(b"\x00\xff not json\n{{{\n")
    (sweep / "sweep.json").write_text("{not json")
    fitted = fit_results(root, SETTINGS)
    return {r.variant: r for r in fitted.runs}, fitted, resumed


@pytest.mark.parametrize("variant, status, message", [
    ("good", "ok", ""),
    ("too_few", "too_few_points", "2 point(s) in the fit window, need >= 3"),
    ("constant", "flat", "constant reward 0.3"),
    ("decreasing", "diverging", "reward falls with compute"),
    ("some_nan", "repaired", "3 non-finite point(s) dropped"),
    ("all_nan", "invalid", "all 41 eval points have non-finite x or y"),
    ("torn", "repaired", "torn last line skipped"),
    ("resumed", "repaired", "duplicate step line(s), e.g. after a resume: the last one kept"),
    ("noconf", "repaired", "no config.yaml"),
    ("badconf", "repaired", "unreadable config.yaml"),
    ("empty", "no_data", "no eval lines in metrics.jsonl"),
    ("train_only", "no_data", "no eval lines in metrics.jsonl"),
    ("garbage", "no_data", "unparseable line skipped"),
])
def test_each_bad_input_gets_its_status(results, variant, status, message):
    runs, _, _ = results
    run = runs[variant]
    assert run.status == status, run.message
    assert message in run.message
    assert "\n" not in run.message


def test_the_good_run_still_fits_and_the_comparison_skips_failures(results):
    runs, fitted, _ = results
    assert runs["good"].A == pytest.approx(0.61, abs=0.03)
    rank = {c.variant: c for c in fitted.comparison if c.kind == "rank"}
    assert rank["good"].rank is not None
    assert rank["constant"].rank is None and rank["constant"].note == "no ok fit"
    assert rank["torn"].rank is not None  # a repaired run is ranked like an ok one
    assert not [c for c in fitted.comparison if c.kind == "loo"]  # sweep.json unreadable: no LOO table
    json.loads(fitted.to_json())  # no NaN reaches fits.json


def test_resume_duplicates_keep_the_last_line_and_seed_falls_back_to_the_folder(results):
    runs, _, resumed = results
    assert runs["resumed"].points_y[10:16] == pytest.approx(list(resumed[10:16] + 0.05))
    assert len(runs["resumed"].points_y) == X.size
    assert runs["noconf"].seed == 3
    assert runs["badconf"].seed is None and runs["good"].seed == 0


def test_points_and_r0_by_hand(tmp_path):
    """A run whose first eval is not at x = 0 takes R0 from it and says so; --r0 overrides."""
    xs = np.linspace(100, 16000, 30)
    _evals(tmp_path / "r" / "late", sigmoid(xs, 0.25, 0.6, 2.0, 3000.0), xs=xs)
    run = fit_results(tmp_path / "r", SETTINGS).runs[0]
    assert run.R0 == pytest.approx(float(sigmoid(100.0, 0.25, 0.6, 2.0, 3000.0)))
    assert "no eval at x=0" in run.message
    override = fit_results(tmp_path / "r", FitSettings(n_boot=0, r0=0.25)).runs[0]
    assert override.R0 == 0.25 and override.A == pytest.approx(0.6, abs=1e-5)


def test_unusable_sources_raise_source_error(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        fit_results(tmp_path / "missing", SETTINGS)
    (tmp_path / "t.csv").write_text("run,x\na,1\n")
    with pytest.raises(SourceError, match="lacks column"):
        fit_results(tmp_path / "t.csv", SETTINGS)
    assert fit_results(tmp_path, SETTINGS).runs == []


def _tidy_frame():
    rows = []
    for seed in (0, 1):
        x, y = synthetic_curve(TABLE1["gens_8"], 50, 0.01, np.random.default_rng(seed))
        rows += [{"run": "verl_grpo", "x": a, "y": b, "seed": seed} for a, b in zip(x, y)]
    x, y = synthetic_curve(TABLE1["batch_2048"], 50, 0.01, np.random.default_rng(9))
    rows += [{"run": "trl_big_batch", "x": a, "y": b, "seed": 0} for a, b in zip(x, y)]
    rows += [{"run": "broken", "x": 1.0, "y": "n/a", "seed": 0}]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tidy_files_from_other_trainers(tmp_path, suffix):
    path = tmp_path / f"external{suffix}"
    frame = _tidy_frame()
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.astype({"y": str}).to_parquet(path)
    fitted = fit_results(path, SETTINGS)
    runs = {(r.variant, r.seed): r for r in fitted.runs}
    assert set(runs) == {("verl_grpo", 0), ("verl_grpo", 1), ("trl_big_batch", 0), ("broken", 0)}
    assert {r.sweep for r in fitted.runs} == {"external"}
    assert runs[("verl_grpo", 0)].status == "ok" and runs[("verl_grpo", 0)].seed_std_A is not None
    assert runs[("trl_big_batch", 0)].A == pytest.approx(0.645, abs=0.03)
    assert runs[("broken", 0)].status == "invalid"
    assert [c.variant for c in fitted.comparison if c.kind == "rank" and c.rank] == ["trl_big_batch", "verl_grpo"]


def test_per_task_metric_of_a_multi_task_run(tmp_path):
    """Section 5's math + code run: one curve per task key of the same eval lines."""
    run = tmp_path / "mt" / "math_code"
    run.mkdir(parents=True)
    math_y = sigmoid(X, 0.3, 0.595, 2.05, 2896.0)
    code_y = sigmoid(X, 0.2, 0.615, 1.09, 1675.0)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "kind": "eval", "gpu_hours": float(x), "val_reward": float((m + c) / 2),
                    "val_reward/math": float(m), "val_reward/code": float(c)}) + "\n"
        for i, (x, m, c) in enumerate(zip(X, math_y, code_y))))
    for key, spec in (("val_reward/math", TABLE1["math"]), ("val_reward/code", TABLE1["code"])):
        fit = fit_results(tmp_path / "mt", FitSettings(y=key, n_boot=0)).runs[0]
        assert (fit.A, fit.B) == pytest.approx((spec.A, spec.B), rel=1e-4)
    with pytest.raises(MetricError, match="'val_reward/chem' is in no eval line; eval metrics found: gpu_hours, "
                                          "step, val_reward, val_reward/code, val_reward/math"):
        fit_results(tmp_path / "mt", FitSettings(y="val_reward/chem", n_boot=0))
