"""Fitting Eq. 1 (App. A.5): hand-checkable cases, recovery of the paper's Table 1 parameters, the fast
method against the paper's grid, extrapolation from half the compute, the App. A.4 power law, the
bootstrap, and the window / grid rescaling rules."""
from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy.stats import f as f_dist

from rlscale.fit.bootstrap import bootstrap_ci
from rlscale.fit.curves import Curve
from rlscale.fit.fast import fit_fast
from rlscale.fit.forms import power_law, sigmoid
from rlscale.fit.paper import fit_paper
from rlscale.fit.powerlaw import fit_power_law
from rlscale.fit.profile import profile_interval_a, profile_sse
from rlscale.fit.one_run import fit_curve, residual_noise
from rlscale.fit.results import FitSettings
from rlscale.fit.space import SearchSpace, search_space
from rlscale.testing.curves import R0, TABLE1, synthetic_curve
from rlscale.fit.window import fit_window

BOX = SearchSpace(a_lo=0.0, a_hi=1.0, a_step=0.005, c_lo=100.0, c_hi=40000.0, c_n=100)
SEEDS = (0, 1, 2)
POINTS = {0: 40, 1: 60, 2: 80}


def _fit_window_points(x, y, settings: FitSettings):
    window = fit_window(x, settings)
    mask = window.mask(x)
    return x[mask], y[mask], search_space(settings, window)


def test_sigmoid_is_eq1_by_hand():
    # C = C_mid: half of the gain; C = 2 C_mid with B = 2: gain / (1 + 1/4)
    assert sigmoid(2000.0, 0.2, 0.6, 1.5, 2000.0) == pytest.approx(0.4)
    assert sigmoid(4000.0, 0.2, 0.6, 2.0, 2000.0) == pytest.approx(0.2 + 0.4 / 1.25)
    assert sigmoid(0.0, 0.2, 0.6, 2.0, 2000.0) == pytest.approx(0.2)
    assert power_law(100.0, 0.7, 2.0, 0.5) == pytest.approx(0.5)


def test_fast_recovers_a_noise_free_curve_exactly():
    x = np.linspace(1500, 16000, 40)
    fit = fit_fast(x, sigmoid(x, 0.3, 0.61, 1.92, 2542.0), 0.3, BOX)
    assert fit.A == pytest.approx(0.61, abs=1e-6)
    assert fit.B == pytest.approx(1.92, rel=1e-5)
    assert fit.C_mid == pytest.approx(2542.0, rel=1e-5)
    assert fit.sse < 1e-16


def test_fixed_a_refit_recovers_b_when_a_is_the_truth():
    x = np.linspace(1500, 16000, 40)
    fit = fit_fast(x, sigmoid(x, 0.3, 0.61, 1.92, 2542.0), 0.3, BOX.with_fixed_a(0.61), start=(3000.0, 1.0))
    assert (fit.A, fit.B, fit.C_mid) == pytest.approx((0.61, 1.92, 2542.0), rel=1e-5)


@pytest.fixture(scope="module")
def table1_fits():
    """Each Table 1 row + N(0, 0.01) on every eval (R0 too), with 40/60/80 points for seeds 0/1/2, fitted
    with the default settings (paper cutoff 1.5k GPU-hours)."""
    fits = {}
    for name, spec in TABLE1.items():
        for seed in SEEDS:
            x, y = synthetic_curve(spec, POINTS[seed], 0.01, np.random.default_rng(seed))
            xf, yf, space = _fit_window_points(x, y, FitSettings(x="gpu_hours"))
            fits[name, seed] = fit_fast(xf, yf, y[0], space)
    return fits


def _within(fit, spec) -> bool:
    return (abs(fit.A - spec.A) <= 0.02 and abs(fit.B / spec.B - 1) <= 0.15
            and abs(fit.C_mid / spec.C_mid - 1) <= 0.25)


@pytest.mark.parametrize("name", list(TABLE1))
def test_table1_parameters_are_recovered(table1_fits, name):
    """The variant's estimate (the seed mean, as ``rlscale fit`` ranks variants) is within A 0.02, B 15%,
    C_mid 25% of the Table 1 row."""
    spec = TABLE1[name]
    fits = [table1_fits[name, seed] for seed in SEEDS]
    assert statistics.fmean(f.A for f in fits) == pytest.approx(spec.A, abs=0.02)
    assert statistics.fmean(f.B for f in fits) == pytest.approx(spec.B, rel=0.15)
    assert statistics.fmean(f.C_mid for f in fits) == pytest.approx(spec.C_mid, rel=0.25)


def test_single_seed_recovery_rate(table1_fits):
    """Single seeds meet the same tolerance at least 90% of the time: the 15% on B is about 2 standard
    errors of a 60-point fit with 0.01 noise (Monte Carlo: ~5% of seeds miss it, ~20% for the code row,
    whose C_mid is at the 1.5k cutoff)."""
    within = [_within(fit, TABLE1[name]) for (name, _), fit in table1_fits.items()]
    assert sum(within) >= 0.9 * len(within), f"{sum(within)}/{len(within)} single-seed fits within tolerance"


@pytest.mark.parametrize("name", list(TABLE1))
def test_extrapolation_from_half_the_compute(name):
    """Fit up to half of each run's compute, predict the reward at its end: the variant's prediction
    (seed mean) is within 0.02 of the true curve, and every seed within 0.02 of the truth + 2 noise sd."""
    spec = TABLE1[name]
    predicted, truth = [], None
    for seed in SEEDS:
        x, y = synthetic_curve(spec, POINTS[seed], 0.01, np.random.default_rng(seed))
        xf, yf, space = _fit_window_points(x, y, FitSettings(x="gpu_hours", fit_until_frac=0.5))
        assert xf.max() <= x[-1] / 2 * (1 + 1e-9)
        fit = fit_fast(xf, yf, y[0], space)
        predicted.append(float(sigmoid(x[-1], y[0], fit.A, fit.B, fit.C_mid)))
        truth = float(sigmoid(x[-1], R0, spec.A, spec.B, spec.C_mid))
        assert abs(predicted[-1] - truth) <= 0.04
    assert statistics.fmean(predicted) == pytest.approx(truth, abs=0.02)


def test_fast_is_never_worse_than_the_paper_grid():
    """Same points, every Table 1 row: the fast SSE is <= the paper method's, on a coarser copy of the
    paper's grids (to keep the suite fast) and on the full App. A.5 grids for one run."""
    coarse = SearchSpace(a_lo=0.45, a_hi=0.80, a_step=0.05, c_lo=100.0, c_hi=40000.0, c_n=12)
    for i, spec in enumerate(TABLE1.values()):
        x, y = synthetic_curve(spec, 60, 0.01, np.random.default_rng(100 + i))
        xf, yf, fast_space = _fit_window_points(x, y, FitSettings(x="gpu_hours"))
        fast = fit_fast(xf, yf, y[0], fast_space)
        assert fast.sse <= fit_paper(xf, yf, y[0], coarse).sse * (1 + 1e-9)
        fixed = 0.6
        assert (fit_fast(xf, yf, y[0], fast_space.with_fixed_a(fixed), start=(fast.C_mid, fast.B)).sse
                <= fit_paper(xf, yf, y[0], coarse.with_fixed_a(fixed)).sse * (1 + 1e-9))
    x, y = synthetic_curve(TABLE1["scalerl"], 60, 0.01, np.random.default_rng(7))
    xf, yf, paper_space = _fit_window_points(x, y, FitSettings(x="gpu_hours", method="paper"))
    assert len(paper_space.a_values()) == 71 and len(paper_space.c_values()) == 100
    paper = fit_paper(xf, yf, y[0], paper_space)
    assert paper.A in paper_space.a_values() and paper.C_mid in paper_space.c_values()
    assert fit_fast(xf, yf, y[0], _fit_window_points(x, y, FitSettings(x="gpu_hours"))[2]).sse <= paper.sse * (1 + 1e-9)


def test_power_law_recovers_its_own_form_and_hits_its_ceiling_on_a_sigmoid():
    x = np.linspace(1000, 50000, 30)
    law = fit_power_law(x, power_law(x, 0.7, 20.0, 0.5), (0.0, 1.0))
    assert (law.A, law.D, law.B) == pytest.approx((0.7, 20.0, 0.5), rel=1e-4)
    assert law.sse < 1e-12
    # App. A.4: on an early window of a sigmoid the power law overshoots the asymptote (paper: A = 1.0)
    x = np.linspace(1500, 8000, 40)
    early = fit_power_law(x, sigmoid(x, 0.3, 0.61, 1.92, 2542.0), (0.0, 1.0))
    assert early.A > 0.61 + 0.02


# val_reward/sums3 of scalerl seed 0 in docs/examples/smollm2-sums-loo-size, on training FLOPs: up in three evals,
# then flat, so the power law's best B is a step
SUMS3_FLOPS = np.array([0.0, 2.177e14, 4.2621e14, 6.1622e14, 7.9069e14, 9.5796e14, 1.1221e15, 1.2859e15, 1.4485e15,
                        1.6126e15, 1.7786e15, 1.9453e15, 2.1122e15, 2.281e15, 2.4499e15, 2.6183e15, 2.7879e15,
                        2.957e15, 3.1263e15, 3.2963e15, 3.466e15, 3.6364e15, 3.8072e15, 3.9779e15, 4.1485e15,
                        4.3194e15, 4.4905e15, 4.6612e15, 4.8287e15, 4.9949e15, 5.1611e15])
SUMS3 = np.array([0.018, 0.022, 0.046, 0.048, 0.07, 0.064, 0.064, 0.066, 0.062, 0.07, 0.062, 0.064, 0.066, 0.072, 0.07,
                  0.072, 0.074, 0.072, 0.078, 0.066, 0.064, 0.064, 0.068, 0.062, 0.074, 0.078, 0.074, 0.066, 0.068,
                  0.07, 0.062])


def test_power_law_stays_finite_on_training_flops():
    """On FLOPs (C up to 5e15) a step's power law would have B = 20 and D near 1e300; B stops where D and C^B stay
    finite floats, so the fit of the run ends ok (it raised OverflowError, and the run was marked failed)."""
    law = fit_power_law(SUMS3_FLOPS[4:], SUMS3[4:], (0.0, 1.0))
    assert all(np.isfinite(v) for v in (law.A, law.D, law.B, law.sse)) and law.B <= 600 / np.log(SUMS3_FLOPS[-1])
    assert np.isfinite(power_law(SUMS3_FLOPS[4:], law.A, law.D, law.B)).all()
    n = SUMS3.size
    curve = Curve(sweep="s", variant="v", seed=0, run_path="r", x=SUMS3_FLOPS, y=SUMS3, se=np.full(n, 0.0114),
                  samples=np.full(n, 500.0), prompts=np.full(n, 500.0))
    assert fit_curve(curve, FitSettings(x="flops")).status == "ok"


def test_bootstrap_interval_is_seeded_and_brackets_the_estimate():
    x, y = synthetic_curve(TABLE1["scalerl"], 60, 0.01, np.random.default_rng(3))
    xf, yf, space = _fit_window_points(x, y, FitSettings(x="gpu_hours"))
    point = fit_fast(xf, yf, y[0], space)
    noise = residual_noise(xf, yf, y[0], point)
    runs = [bootstrap_ci(xf, y[0], space, point, noise, [8000.0, 32000.0], 50, 0.9, np.random.default_rng(5))
            for _ in range(2)]
    assert runs[0] == runs[1]
    ci = runs[0]
    assert ci.B[0] <= point.B <= ci.B[1] and ci.C_mid[0] <= point.C_mid <= ci.C_mid[1]
    assert [lo <= hi for lo, hi in ci.predictions] == [True, True]


def test_profile_interval_of_a_by_hand_on_independent_noise():
    """With independent noise and no inflation the interval is where the profiled SSE rises by
    s^2 F(level; 1, n - 3) above its minimum; both ends sit on that bound, on either side of A."""
    x, y = synthetic_curve(TABLE1["scalerl"], 60, 0.01, np.random.default_rng(3))
    xf, yf, space = _fit_window_points(x, y, FitSettings(x="gpu_hours"))
    point = fit_fast(xf, yf, y[0], space)
    lo, hi = profile_interval_a(xf, yf, y[0], space, point, 1.0, 0.95)
    bound = point.sse * (1 + f_dist.ppf(0.95, 1, xf.size - 3) / (xf.size - 3))
    assert lo < point.A < hi and hi - lo < 0.05
    for end in (lo, hi):
        assert profile_sse(xf, yf, y[0], space, end) == pytest.approx(bound, rel=2e-3)
    wider = profile_interval_a(xf, yf, y[0], space, point, 4.0, 0.95)  # 4x the variance: about twice as wide
    assert (wider[1] - wider[0]) / (hi - lo) == pytest.approx(2.0, rel=0.15)


def test_window_rules():
    long_run = np.linspace(0, 16000, 41)
    paper = fit_window(long_run, FitSettings(x="gpu_hours"))
    assert (paper.cutoff, paper.rule, paper.c_scale) == (1500.0, "paper 1.5k GPU-h", 1.0)
    short = fit_window(np.linspace(0, 0.08, 13), FitSettings(x="gpu_hours"))
    assert short.cutoff == pytest.approx(0.008) and short.rule == "10% of run"
    flops = fit_window(long_run * 1e15, FitSettings(x="flops"))
    assert flops.cutoff == pytest.approx(1.6e18) and flops.c_scale == pytest.approx(1e15)
    until = fit_window(long_run, FitSettings(fit_until_frac=0.25))
    assert until.fit_until == 4000.0 and until.length == 4000.0 and until.cutoff == pytest.approx(400.0)
    assert fit_window(long_run, FitSettings(min_compute=3000.0)).cutoff == 3000.0
    assert fit_window(long_run, FitSettings(min_compute_frac=0.2)).cutoff == pytest.approx(3200.0)
    assert list(paper.mask(np.array([0.0, 1000.0, 1500.0, 9000.0]))) == [False, False, True, True]


def test_search_space_rescales_the_paper_grid():
    paper = search_space(FitSettings(method="paper"), fit_window(np.linspace(0, 16000, 41), FitSettings(x="gpu_hours")))
    assert (paper.a_lo, paper.a_hi, paper.c_lo, paper.c_hi, paper.c_n) == (0.45, 0.8, 100.0, 40000.0, 100)
    short = search_space(FitSettings(), fit_window(np.linspace(0, 0.08, 13), FitSettings()))
    assert (short.c_lo, short.c_hi) == pytest.approx((0.08 / 160, 0.08 * 2.5))
    assert (short.a_lo, short.a_hi) == (0.0, 1.0)
    fixed = search_space(FitSettings(c_mid_grid=[1.0, 2.0, 5]), fit_window(np.linspace(0, 9, 4), FitSettings()))
    assert list(fixed.c_values()) == [1.0, 1.25, 1.5, 1.75, 2.0]


def test_default_cutoff_is_continuous_in_the_run_length():
    """Property test: over run lengths around the paper's 15k (where 10 % reaches 1.5k) and its old 6k switch,
    the cutoff and the C_mid grid move by no more than the length does (no jump)."""
    rng = np.random.default_rng(0)
    for unit in ("gpu_hours", "core_hours", "flops"):
        lengths = np.sort(np.concatenate([rng.uniform(100, 60000, 400), [5999.9, 6000.0, 14999.9, 15000.0]]))
        cut = [fit_window(np.array([0.0, 0.5 * n, n]), FitSettings(x=unit)) for n in lengths]
        cutoffs, scales = np.array([w.cutoff for w in cut]), np.array([w.c_scale for w in cut])
        steps = np.diff(lengths)
        assert np.all(np.abs(np.diff(cutoffs)) <= 0.1 * steps + 1e-9)
        assert np.all(np.abs(np.diff(scales)) <= steps / 6000 + 1e-12)
    assert fit_window(np.array([0.0, 5800.0]), FitSettings(x="gpu_hours")).cutoff == pytest.approx(580.0)
    assert fit_window(np.array([0.0, 6000.0]), FitSettings(x="gpu_hours")).cutoff == pytest.approx(600.0)
    assert fit_window(np.array([0.0, 40000.0]), FitSettings(x="gpu_hours")).cutoff == 1500.0


def test_window_is_decided_on_the_deterministic_axis():
    """The same evals with measured times perturbed (as under load) keep the same fitted points."""
    steps = np.arange(0, 101, 5, dtype=float)
    hours = steps * 0.01
    perturbed = hours * np.r_[1.0, np.random.default_rng(1).uniform(0.85, 1.15, steps.size - 1)]
    perturbed = np.maximum.accumulate(perturbed)
    masks = [fit_window(x, FitSettings(x="core_hours"), steps).mask(x, steps) for x in (hours, perturbed)]
    assert list(masks[0]) == list(masks[1]) and list(steps[masks[0]])[0] == 10.0
    until = [fit_window(x, FitSettings(x="core_hours", fit_until_frac=0.5), steps) for x in (hours, perturbed)]
    assert [list(w.beyond(x, steps)) for w, x in zip(until, (hours, perturbed))] == [list(steps > 50)] * 2
