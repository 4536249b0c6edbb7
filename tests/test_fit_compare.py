"""Comparing variants (App. A.7, Section 4): the margin rule of the ranking, the LOO table with its
fixed-A refit and verdicts, and the seed spread, on noise-free curves whose answers are known by hand."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlscale.fit.api import fit_results
from rlscale.fit.forms import sigmoid
from rlscale.fit.schema import FitSettings
from rlscale.fit.synthetic import write_run

X = np.linspace(0, 16000, 49)
SETTINGS = FitSettings(n_boot=0)


def _write(root, folder, a, b, c_mid=2500.0, seed=0):
    write_run(root / folder, X, sigmoid(X, 0.3, a, b, c_mid), seed=seed)


def test_ranking_refits_variants_within_the_margin_at_their_mean_a(tmp_path):
    sweep = tmp_path / "res" / "grid"
    _write(sweep, "high_a_low_b", 0.61, 1.5)
    _write(sweep, "low_a_high_b", 0.60, 2.5)
    _write(sweep, "far_below", 0.55, 3.0)
    fitted = fit_results(tmp_path / "res", SETTINGS)
    rank = [c for c in fitted.comparison if c.kind == "rank"]
    assert [c.variant for c in rank] == ["low_a_high_b", "high_a_low_b", "far_below"]
    first, second, third = rank
    assert (first.A_fixed, second.A_fixed) == pytest.approx((0.605, 0.605))
    assert first.B_fixed > second.B_fixed
    assert "A within 0.02 of high_a_low_b: both refit at A=0.605" in first.note
    assert third.A_fixed is None and third.note == ""
    by_a = fit_results(tmp_path / "res", FitSettings(n_boot=0, margin=0.0)).comparison
    assert [c.variant for c in by_a if c.kind == "rank"] == ["high_a_low_b", "low_a_high_b", "far_below"]


@pytest.fixture(scope="module")
def loo(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("loo") / "res" / "loo"
    _write(sweep, "scalerl_s0", 0.609, 2.0, seed=0)
    _write(sweep, "scalerl_s1", 0.611, 2.0, seed=1)
    _write(sweep, "loss_dapo", 0.61, 1.6)
    _write(sweep, "bf16_head", 0.55, 2.0)
    _write(sweep, "agg_sample", 0.61, 2.1)
    _write(sweep, "batch_big_folder", 0.65, 2.0)  # sweep.json maps this folder to the variant "better"
    spec = {"name": "loo", "base": "scalerl", "kind": "loo", "jobs": {}, "variants": [
        {"name": "scalerl", "run": "scalerl_s0", "overrides": [], "axis": None, "seed": 0},
        {"name": "scalerl", "run": "scalerl_s1", "overrides": [], "axis": None, "seed": 1},
        {"name": "loss_dapo", "run": "loss_dapo", "overrides": ["loss=dapo"], "axis": "loss", "seed": 0},
        {"name": "bf16_head", "run": "bf16_head", "overrides": ["precision=bf16_head"], "axis": "precision", "seed": 0},
        {"name": "agg_sample", "run": "agg_sample", "overrides": ["aggregation=sample"], "axis": "aggregation",
         "seed": 0},
        {"name": "better", "run": "batch_big_folder", "overrides": ["batch=big"], "axis": "batch", "seed": 0},
        {"name": "never_ran", "run": "never_ran", "overrides": ["length=penalty"], "axis": "length", "seed": 0}]}
    (sweep / "sweep.json").write_text(json.dumps(spec))
    return fit_results(sweep.parent, SETTINGS)


def test_a_grid_sweep_gets_a_ranking_but_no_loo_table(tmp_path):
    sweep = tmp_path / "res" / "batch"
    _write(sweep, "prompts=8", 0.58, 2.0)
    _write(sweep, "prompts=32", 0.64, 2.0)
    (sweep / "sweep.json").write_text(json.dumps({"name": "batch", "base": "prompts=8", "kind": "grid", "variants": [
        {"name": "prompts=8", "run": "prompts=8", "axis": "batch.prompts"},
        {"name": "prompts=32", "run": "prompts=32", "axis": "batch.prompts"}]}))
    comparison = fit_results(tmp_path / "res", SETTINGS).comparison
    assert [c.variant for c in comparison] == ["prompts=32", "prompts=8"] and {c.kind for c in comparison} == {"rank"}


def test_loo_table_fixes_a_at_the_sweep_mean_and_gives_verdicts(loo):
    rows = {c.variant: c for c in loo.comparison if c.kind == "loo"}
    assert list(rows) == ["scalerl", "loss_dapo", "bf16_head", "agg_sample", "better", "never_ran"]
    a_fixed = (0.609 + 0.611 + 0.61 + 0.55 + 0.61 + 0.65) / 6  # every run of the sweep, seeds included
    assert [c.A_fixed for c in rows.values()] == pytest.approx([a_fixed] * 6, abs=1e-6)
    assert rows["scalerl"].verdict == "base" and rows["scalerl"].A == pytest.approx(0.61, abs=1e-6)
    assert rows["loss_dapo"].axis == "loss" and rows["loss_dapo"].dA == pytest.approx(0.0, abs=1e-5)
    assert rows["loss_dapo"].dB < 0 and rows["loss_dapo"].verdict == "lower efficiency"
    assert rows["bf16_head"].dA == pytest.approx(-0.06, abs=1e-5) and rows["bf16_head"].verdict == "lower ceiling"
    assert rows["agg_sample"].dB > 0 and rows["agg_sample"].verdict == "within margin"
    assert rows["better"].verdict == "higher ceiling"
    assert rows["never_ran"].note == "no ok fit" and rows["never_ran"].dA is None


def test_seed_spread_of_a_multi_seed_variant(loo):
    base = [r for r in loo.runs if r.variant == "scalerl"]
    assert sorted(r.seed for r in base) == [0, 1]
    assert [r.seed_std_A for r in base] == pytest.approx([np.std([0.609, 0.611], ddof=1)] * 2, abs=1e-6)
    assert [r.seed_std_B for r in base] == pytest.approx([0.0, 0.0], abs=1e-4)
    assert all(r.seed_std_A is None for r in loo.runs if r.variant != "scalerl")
    rank = {c.variant: c for c in loo.comparison if c.kind == "rank"}
    assert rank["scalerl"].A == pytest.approx(0.61, abs=1e-6) and rank["scalerl"].note.startswith("mean of 2 seeds")


def test_paper_method_end_to_end_with_small_grids(tmp_path):
    sweep = tmp_path / "res" / "grid"
    _write(sweep, "a", 0.60, 2.0, c_mid=3000.0)
    _write(sweep, "b", 0.61, 1.5, c_mid=3000.0)
    settings = FitSettings(method="paper", n_boot=5, a_grid=[0.5, 0.7, 0.01], c_mid_grid=[1000.0, 5000.0, 9])
    fitted = fit_results(tmp_path / "res", settings)
    runs = {r.variant: r for r in fitted.runs}
    assert (runs["a"].A, runs["a"].C_mid, runs["a"].B) == pytest.approx((0.60, 3000.0, 2.0), rel=1e-6)
    assert runs["a"].A_lo is not None
    rank = [c for c in fitted.comparison if c.kind == "rank"]
    assert rank[0].A_fixed == pytest.approx(0.605) and rank[0].variant == "a"
