"""Comparing variants (App. A.7, Section 4): the tier ranking, the LOO table with its fixed-A refit,
intervals and verdicts, and the seed spread, on curves whose answers are known by hand; the verdicts on
synthetic LOO sweeps with known truth at paper-scale noise; the ranking's transitivity (property test)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from rlscale.fit.api import fit_results
from rlscale.fit.compare import compare
from rlscale.fit.forms import sigmoid
from rlscale.fit.ranking import tiers
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FINDINGS, FitSettings
from rlscale.testing.curves import TABLE1, loo_sweep, write_run

X = np.linspace(0, 16000, 49)
SETTINGS = FitSettings(n_boot=0)
BOOT = FitSettings(n_boot=40)


def _write(root, folder, a, b, c_mid=2500.0, seed=0, jitter=0.0):
    write_run(root / folder, X, sigmoid(X, 0.3, a + jitter, b * (1 + jitter), c_mid), seed=seed)


def _seeds(root, name, a, b, c_mid=2500.0):
    """Three noise-free seeds whose A differ by +-0.002 and B by +-0.2 %: a seed spread known by hand."""
    for seed, jitter in enumerate((-0.002, 0.0, 0.002)):
        _write(root, f"{name}_s{seed}", a, b, c_mid, seed=seed, jitter=jitter)


def test_ranking_tiers_by_a_then_by_b_at_the_tier_mean_a(tmp_path):
    sweep = tmp_path / "res" / "grid"
    _seeds(sweep, "high_a_low_b", 0.61, 1.5)
    _seeds(sweep, "low_a_high_b", 0.60, 2.5)
    _seeds(sweep, "far_below", 0.55, 3.0)
    fitted = fit_results(tmp_path / "res", SETTINGS)
    rank = [c for c in fitted.comparison if c.kind == "rank"]
    assert [(c.variant, c.rank, c.tie) for c in rank] == [
        ("low_a_high_b", 1, False), ("high_a_low_b", 2, False), ("far_below", 3, False)]
    first, second, third = rank
    assert (first.A_fixed, second.A_fixed) == pytest.approx((0.605, 0.605), abs=1e-6)
    assert first.B_fixed > second.B_fixed and second.dB < 0 and second.dB_hi < 0
    assert second.interval_source == "paired n=3" and "ordered by B at A=0.605" in second.note
    assert "dB vs low_a_high_b: resolved" in second.note and "far_below" not in second.note
    assert third.dA == pytest.approx(-0.06, abs=1e-4) and third.dA_hi < -0.02 and third.A_fixed is None
    # one seed each: no seed spread to compare with, nothing separates: one tier, all tied
    single = tmp_path / "single" / "grid"
    for name, a, b in (("a", 0.61, 1.5), ("b", 0.55, 3.0)):
        _write(single, name, a, b)
    flat = [c for c in fit_results(tmp_path / "single", SETTINGS).comparison if c.kind == "rank"]
    assert [(c.rank, c.tie) for c in flat] == [(1, True), (1, True)]


def test_a_not_identified_is_never_ranked_first_nor_in_the_fixed_a(tmp_path):
    sweep = tmp_path / "res" / "loo"
    _write(sweep, "base", 0.61, 2.0)
    _write(sweep, "late", 0.70, 2.0, c_mid=30000.0)  # ends at 16k, before its curve bends at 30k
    _write(sweep, "edge", 1.3, 1.0, c_mid=12000.0)  # a ceiling beyond Eq. 1's [0, 1]: A fits at 1
    (sweep / "sweep.json").write_text(json.dumps({"name": "loo", "base": "base", "kind": "loo", "variants": [
        {"name": "base", "run": "base", "axis": None}, {"name": "late", "run": "late", "axis": "length"},
        {"name": "edge", "run": "edge", "axis": "precision"}]}))
    fitted = fit_results(tmp_path / "res", BOOT)
    late = next(r for r in fitted.runs if r.variant == "late")
    assert late.A_identified is False and "before its curve bends" in late.A_identified_reason
    edge = next(r for r in fitted.runs if r.variant == "edge")
    assert edge.A == pytest.approx(1.0) and edge.A_identified is False
    assert edge.A_identified_reason == "A at the edge of its range [0, 1]" and not edge.A_interval_open
    assert next(r for r in fitted.runs if r.variant == "base").A_identified is True
    rank = {c.variant: c for c in fitted.comparison if c.kind == "rank"}
    assert rank["base"].rank == 1 and rank["late"].rank is None and rank["late"].reason == "A not identified"
    assert rank["edge"].rank is None and rank["edge"].note.startswith("not ranked: A at the edge")
    loo = {c.variant: c for c in fitted.comparison if c.kind == "loo"}
    assert loo["late"].A_fixed == pytest.approx(0.61, abs=1e-4)  # the base alone
    assert (loo["late"].verdict, loo["late"].reason, loo["late"].needs) == ("unresolved", "A not identified",
                                                                           "more compute")
    assert loo["late"].verdict_text == "unresolved (A not identified): more compute"


def test_a_variant_is_compared_on_the_seeds_whose_A_is_identified():
    from rlscale.fit.compare import VariantFit
    from rlscale.fit.results import RunFit

    def run(seed, open_, a=0.6):
        return RunFit(sweep="s", variant="v", seed=seed, status="ok", A=a, B=2.0, C_mid=1.0,
                      A_identified=not open_, A_interval_open=open_,
                      A_identified_reason="A's interval reaches the edge of its range [0, 1]" if open_ else "")

    two_of_three = VariantFit("s", "v", [run(0, True, 0.9), run(1, False, 0.6), run(2, False, 0.62)])
    assert two_of_three.unidentified == ""
    assert two_of_three.a_values() == {1: 0.6, 2: 0.62}
    assert two_of_three.A == 0.61  # the open seed's 0.9 enters no mean of A
    assert two_of_three.left_out == "seed 0 left out of dA (A not identified)"
    one_of_three = VariantFit("s", "v", [run(0, True), run(1, True), run(2, False)])
    assert one_of_three.unidentified == "" and one_of_three.left_out == "seeds 0, 1 left out of dA (A not identified)"
    assert VariantFit("s", "v", [run(0, True)]).unidentified.startswith("A's interval reaches")
    bent_late = RunFit(sweep="s", variant="v", seed=3, status="ok", A=0.6, B=2.0, C_mid=1.0, A_identified=False,
                       A_interval_open=False, A_identified_reason="the run ends before its curve bends")
    assert VariantFit("s", "v", [bent_late, run(0, True)]).unidentified == (
        "no seed of 2: seed 3: the run ends before its curve bends")


def _ranked_sweep(rng, n_variants, n_seeds):
    effects = {f"v{i}": (float(rng.normal(0, 0.03)), float(rng.normal(0, 0.5))) for i in range(n_variants)}
    curves, spec = loo_sweep(TABLE1["scalerl"], effects, n_seeds, rng)
    runs = [fit_curve(c, BOOT) for c in curves]
    return runs, [c for c in compare(runs, {"loo": spec}, BOOT) if c.kind == "rank"]


@pytest.mark.parametrize("seed", range(4))
def test_ranking_is_a_strict_weak_order_whatever_the_input_order(seed):
    """Property test on random sweeps: ranks never decrease down the printed order, tied rows share a rank
    and differ from their neighbours' ranks only at tier cuts, a higher rank never has a lower A unless
    both sit in one A tier, and shuffling the runs gives the same ranking."""
    rng = np.random.default_rng(seed)
    runs, rows = _ranked_sweep(rng, n_variants=6, n_seeds=int(rng.choice([1, 3])))
    ranked = [c for c in rows if c.rank is not None]
    ranks = [c.rank for c in ranked]
    assert ranks == sorted(ranks) and sorted(set(ranks)) == list(range(1, max(ranks) + 1))
    for r in set(ranks):
        members = [c for c in ranked if c.rank == r]
        assert all(c.tie == (len(members) > 1) for c in members)
    for above in ranked:  # transitivity of "ranked above" and consistency with A across A tiers
        for below in ranked:
            if above.rank < below.rank and above.A_fixed is None and below.A_fixed is None:
                assert above.A >= below.A
            for third in ranked:
                if above.rank < below.rank and below.rank < third.rank:
                    assert above.rank < third.rank
    order = list(rng.permutation(len(runs)))
    shuffled = [c for c in compare([runs[i] for i in order], {}, BOOT) if c.kind == "rank"]
    assert [(c.variant, c.rank, c.tie) for c in shuffled] == [(c.variant, c.rank, c.tie) for c in rows]


def test_tiers_cut_against_the_first_member_so_chains_do_not_merge():
    # 0.63 ~ 0.615 ~ 0.60 pairwise within 0.02, but 0.60 is separated from the tier's first member
    values = {"a": 0.63, "b": 0.615, "c": 0.60, "d": 0.60}
    cut = tiers(list(values), values.get, str, lambda top, v: values[top] - values[v] > 0.02)
    assert cut == [["a", "b"], ["c", "d"]]


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
    return fit_results(sweep.parent, BOOT)


@pytest.fixture(scope="module")
def loo_dir(loo):
    return Path(loo.settings.source)


def test_a_grid_sweep_gets_a_ranking_but_no_loo_table(tmp_path):
    sweep = tmp_path / "res" / "batch"
    _write(sweep, "prompts=8", 0.58, 2.0)
    _write(sweep, "prompts=32", 0.64, 2.0)
    (sweep / "sweep.json").write_text(json.dumps({"name": "batch", "base": "prompts=8", "kind": "grid", "variants": [
        {"name": "prompts=8", "run": "prompts=8", "axis": "batch.prompts"},
        {"name": "prompts=32", "run": "prompts=32", "axis": "batch.prompts"}]}))
    comparison = fit_results(tmp_path / "res", SETTINGS).comparison
    assert [c.variant for c in comparison] == ["prompts=32", "prompts=8"] and {c.kind for c in comparison} == {"rank"}


def test_loo_table_fixes_a_at_the_sweep_mean_and_gives_verdicts_with_intervals(loo, loo_dir):
    rows = {c.variant: c for c in loo.comparison if c.kind == "loo"}
    assert list(rows) == ["scalerl", "loss_dapo", "bf16_head", "agg_sample", "better", "never_ran"]
    a_fixed = (0.609 + 0.611 + 0.61 + 0.55 + 0.61 + 0.65) / 6  # every run of the sweep, seeds included
    assert [c.A_fixed for c in rows.values()] == pytest.approx([a_fixed] * 6, abs=1e-6)
    assert rows["scalerl"].verdict == "base" and rows["scalerl"].A == pytest.approx(0.61, abs=1e-6)
    assert rows["bf16_head"].dA == pytest.approx(-0.06, abs=1e-5)
    # one-seed variants borrow the base's seed spread (2 seeds: no degree of freedom left to pair them)
    assert rows["bf16_head"].interval_source == "unpaired n=1/2" and -0.02 > rows["bf16_head"].dA_hi
    se = np.std([0.609, 0.611], ddof=1) * np.sqrt(1 + 1 / 2)
    half = 12.706204736174707 * se  # t(0.975, 1)
    assert rows["bf16_head"].dA_lo == pytest.approx(-0.06 - half, abs=1e-4)
    # alone, its interval excludes 0; over the table's 4 axes x 2 tests (Holm) one degree of freedom does not
    p = 2 * student_t.sf(0.06 / se, 1)
    assert rows["bf16_head"].p_value == pytest.approx(p, rel=1e-3) and rows["bf16_head"].family_size == 8
    assert rows["bf16_head"].verdict == "unresolved" and rows["bf16_head"].reason == (
        f"multiple comparisons (p = {p:.2g} alone, {rows['bf16_head'].p_adjusted:.2g} after Holm over 8)")
    assert rows["bf16_head"].p_adjusted > 0.05 and rows["better"].verdict == "unresolved"
    alone = {c.variant: c for c in fit_results(loo_dir, replace(BOOT, correction="none")).comparison
             if c.kind == "loo"}
    assert alone["bf16_head"].verdict == "lower ceiling" and alone["better"].verdict == "higher ceiling"
    assert alone["better"].dA_lo > 0
    # dB of one seed against a spread of B known from one degree of freedom: not resolved
    assert rows["loss_dapo"].axis == "loss" and rows["loss_dapo"].dA == pytest.approx(0.0, abs=1e-5)
    # noise-free curves: every bootstrap draw refits to the same dB, up to the optimizer's tolerance
    dapo = rows["loss_dapo"]
    assert dapo.dB < 0 and dapo.dB_lo - 1e-6 <= dapo.dB <= dapo.dB_hi + 1e-6
    assert rows["loss_dapo"].verdict == "unresolved" and rows["loss_dapo"].reason.startswith("seed spread")
    assert re.fullmatch(r"more seeds \(about \d+ per variant\)", rows["loss_dapo"].needs)
    assert rows["agg_sample"].verdict == "unresolved"
    assert rows["never_ran"].note == "no ok fit" and rows["never_ran"].dA is None


def test_efficiency_verdicts_from_paired_seeds_and_within_margin_inside_the_band(tmp_path):
    sweep = tmp_path / "res" / "loo"
    _seeds(sweep, "base", 0.61, 2.0)
    _seeds(sweep, "slow", 0.61, 1.4)
    _seeds(sweep, "same", 0.61, 2.0)
    (sweep / "sweep.json").write_text(json.dumps({"name": "loo", "base": "base", "kind": "loo", "variants": [
        {"name": n, "run": f"{n}_s{k}", "axis": None if n == "base" else n} for n in ("base", "slow", "same")
        for k in range(3)]}))
    rows = {c.variant: c for c in fit_results(tmp_path / "res", SETTINGS).comparison if c.kind == "loo"}
    slow, same = rows["slow"], rows["same"]
    assert slow.interval_source == "paired n=3" and slow.verdict == "lower efficiency"
    assert slow.dB == pytest.approx(-0.6, abs=0.02) and slow.dB_hi < 0
    assert slow.margin_B == pytest.approx(0.1 * rows["base"].B_fixed)  # the band of "within margin" on B
    assert same.verdict == "within margin" and same.dA_lo >= -0.02 and same.dA_hi <= 0.02
    assert -same.margin_B <= same.dB_lo <= 0 <= same.dB_hi <= same.margin_B


@pytest.fixture(scope="module")
def synthetic_verdicts():
    """Two synthetic LOO sweeps at paper-scale noise (3 seeds, A jittered by 0.008, point noise 0.005):
    three null axes, dA = -0.06, dB = -0.7."""
    effects = {"null0": (0.0, 0.0), "null1": (0.0, 0.0), "null2": (0.0, 0.0), "ceiling": (-0.06, 0.0),
               "efficiency": (0.0, -0.7)}
    verdicts = []
    for seed in range(2):
        curves, spec = loo_sweep(TABLE1["scalerl"], effects, 3, np.random.default_rng(seed))
        runs = [fit_curve(c, BOOT) for c in curves]
        verdicts.append({c.variant: c for c in compare(runs, {"loo": spec}, BOOT) if c.kind == "loo"})
    return verdicts


def test_null_axes_get_no_verdict_and_real_differences_are_found(synthetic_verdicts):
    for rows in synthetic_verdicts:
        assert [rows[f"null{i}"].verdict in FINDINGS for i in range(3)] == [False] * 3
        assert rows["ceiling"].verdict == "lower ceiling" and rows["ceiling"].dA_hi < 0
        assert rows["efficiency"].verdict == "lower efficiency" and rows["efficiency"].dB_hi < 0
        assert all(c.interval_source == "paired n=3" for n, c in rows.items() if n != "base")


def test_seed_spread_of_a_multi_seed_variant(loo):
    base = [r for r in loo.runs if r.variant == "scalerl"]
    assert sorted(r.seed for r in base) == [0, 1]
    assert [r.seed_std_A for r in base] == pytest.approx([np.std([0.609, 0.611], ddof=1)] * 2, abs=1e-6)
    assert [r.seed_std_B for r in base] == pytest.approx([0.0, 0.0], abs=1e-4)
    assert all(r.seed_std_A is None for r in loo.runs if r.variant != "scalerl")
    rank = {c.variant: c for c in loo.comparison if c.kind == "rank"}
    assert rank["scalerl"].A == pytest.approx(0.61, abs=1e-6) and rank["scalerl"].note.startswith("2 seeds")


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


def test_a_variant_compared_on_a_curve_that_is_not_a_sigmoid_says_so():
    from rlscale.fit.compare import VariantFit
    from rlscale.fit.results import RunFit

    def run(seed, misfit=""):
        return RunFit(sweep="s", variant="v", seed=seed, status="ok", A=0.6, B=2.0, C_mid=1.0, A_identified=True,
                      misfit=misfit)

    assert VariantFit("s", "v", [run(0), run(1)]).misfits == ""
    stepped = VariantFit("s", "v", [run(0), run(1, "step change near C = 1.1e+04")])
    assert stepped.misfits == "compared on A although seed 1's curve is not a sigmoid (step change near C = 1.1e+04)"


def test_a_row_whose_da_and_db_pair_different_seeds_names_both(tmp_path):
    """A seed whose curve has not bent (C_mid past the last eval: A not identified) is left out of dA but has a B
    at the common A: the LOO row's interval source names dA's pairing (2 seeds) and dB's (3)."""
    sweep = tmp_path / "res" / "loo"
    variants = []
    for name, axis, b in (("scalerl", None, 2.0), ("loss_dapo", "loss", 1.6)):
        for seed, jitter in enumerate((-0.002, 0.0, 0.002)):
            c_mid = 60000.0 if (name, seed) == ("loss_dapo", 0) else 2500.0
            _write(sweep, f"{name}_s{seed}", 0.61, b, c_mid=c_mid, seed=seed, jitter=jitter)
            variants.append({"name": name, "run": f"{name}_s{seed}", "overrides": [], "axis": axis, "seed": seed})
    (sweep / "sweep.json").write_text(json.dumps({"name": "loo", "base": "scalerl", "kind": "loo", "jobs": {},
                                                  "variants": variants}))
    rows = {c.variant: c for c in fit_results(tmp_path / "res", BOOT).comparison if c.kind == "loo"}
    assert "seed 0 left out of dA (A not identified)" in rows["loss_dapo"].note
    assert rows["loss_dapo"].interval_source == "dA paired n=2, dB paired n=3"
