"""The noise generators of rlscale.testing.curves behind bench/verdict_bench.py: the AR(1) drift has its stated
sd and lag-one correlation, binomial, heavy-tailed and clustered evals write the SE a trainer writes (the clustered
one over prompts), the eval set's prompts average to the population curve, and seeds share their effects across a
sweep's variants (common random numbers) and across sweeps of more seeds."""
from __future__ import annotations

import numpy as np
import pytest

from rlscale.testing.curves import (TABLE1, EvalDraw, SeedSpread, ar1_drift, binomial_evals, clustered_evals,
                                   logit_normal_location, logit_normal_mean, rise_x, seeded_loo_sweep,
                                   student_t_evals)
from rlscale.fit.forms import sigmoid


def test_ar1_drift_has_the_stated_sd_and_lag_one_correlation():
    path = ar1_drift(200_000, 0.01, 0.9, np.random.default_rng(0))
    assert path.std() == pytest.approx(0.01, rel=0.03)
    assert np.corrcoef(path[:-1], path[1:])[0, 1] == pytest.approx(0.9, abs=0.01)
    assert not ar1_drift(50, 0.0, 0.9, np.random.default_rng(0)).any()


def test_binomial_evals_write_the_binomial_se_of_the_observed_rate():
    y, se = binomial_evals(np.array([0.3, 0.6]), 400, np.random.default_rng(1))
    assert y * 400 == pytest.approx(np.round(y * 400))
    assert se == pytest.approx(np.sqrt(y * (1 - y) / 400))


def test_clustered_se_is_computed_over_prompts_and_prompts_average_to_the_population():
    p = np.array([0.3, 0.61])
    assert logit_normal_mean(logit_normal_location(p, 1.5), 1.5) == pytest.approx(p, abs=1e-9)
    rng = np.random.default_rng(2)
    offsets = rng.normal(0.0, 1.5, 200)
    y, se = clustered_evals(p, offsets, 4, 1.5, np.random.default_rng(3))
    rates = np.random.default_rng(3).binomial(
        4, 1 / (1 + np.exp(-(logit_normal_location(p, 1.5)[:, None] + offsets)))) / 4
    assert y == pytest.approx(rates.mean(axis=1))
    assert se == pytest.approx(rates.std(axis=1, ddof=1) / np.sqrt(200))
    # a large eval set of the same population has mean p (the truth is the population curve)
    big, _ = clustered_evals(p, rng.normal(0.0, 1.5, 400_000), 1, 1.5, rng)
    assert big == pytest.approx(p, abs=0.003)


def test_seeded_sweep_shares_seed_effects_across_variants_and_nests_its_seeds():
    draw = EvalDraw(samples=10 ** 9, drift_sd=0.01, every=1000.0)  # evals at the true reward, to 1e-4
    effects = {"null": (0.0, 0.0), "low": (-0.06, 0.0)}
    curves, spec = seeded_loo_sweep(TABLE1["scalerl"], effects, 3, np.random.default_rng(4), draw,
                                    SeedSpread(a_sd=0.012))
    by = {(c.variant, c.seed): c for c in curves}
    assert spec["kind"] == "loo" and len(curves) == 9
    for seed in range(3):
        assert by[("null", seed)].y == pytest.approx(by[("base", seed)].y, abs=1e-3)  # same offset, same drift
    assert np.abs(by[("base", 0)].y - by[("base", 1)].y).max() > 5e-3
    unshared, _ = seeded_loo_sweep(TABLE1["scalerl"], effects, 3, np.random.default_rng(4), draw,
                                   SeedSpread(a_sd=0.012, shared=False))
    assert np.abs(unshared[0].y - unshared[1].y).max() > 5e-3
    more, _ = seeded_loo_sweep(TABLE1["scalerl"], effects, 5, np.random.default_rng(4), draw, SeedSpread(a_sd=0.012))
    assert all(np.array_equal(a.y, b.y) for a, b in zip(curves, more[:9]))


def test_rise_x_is_where_the_curve_has_made_that_fraction_of_its_rise():
    spec = TABLE1["scalerl"]
    x = rise_x(spec, 0.79)
    assert float(sigmoid(x, 0.0, 1.0, spec.B, spec.C_mid)) == pytest.approx(0.79)


def test_student_t_evals_have_the_binomial_sd_and_heavier_tails():
    p = np.full(200_000, 0.5)
    y, se = student_t_evals(p, 400, 3.0, np.random.default_rng(4))
    z = (y - p) / np.sqrt(0.25 / 400)
    assert z.std() == pytest.approx(1.0, rel=0.1)  # t(3): the sd converges slowly
    assert np.mean(np.abs(z) > 4) > 10 * 6.3e-5  # a Gaussian puts 6.3e-5 beyond 4 sd
    assert se == pytest.approx(np.sqrt(y * (1 - y) / 400))
    with pytest.raises(ValueError, match="t_df"):
        student_t_evals(p, 400, 2.0, np.random.default_rng(4))
