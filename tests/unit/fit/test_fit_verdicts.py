"""The verdict rules and the intervals behind them (rlscale.fit.verdicts, rlscale.fit.differences), on
hand-computed numbers: every branch of the LOO verdict, the pooled t-interval, the bootstrap interval and
the eval-noise flag."""
from __future__ import annotations

import numpy as np
import pytest

from rlscale.fit.differences import Pooled, Samples, difference
from rlscale.fit.noise import eval_noise
from rlscale.fit.schema import Difference, RunFit
from rlscale.fit.verdicts import min_effect, seeds_to_resolve, verdict

SEEDS = "seeds n=3"


def _d(value, half, source=SEEDS):
    return Difference(value, value - half, value + half, source)


def test_pooled_t_interval_by_hand():
    pooled = Pooled.of([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [5.0]])  # the one-seed group adds nothing
    assert (pooled.sd, pooled.df) == (1.0, 4)
    d = difference(Samples([1.0, 2.0, 3.0], None), Samples([0.0, 1.0, 2.0], None), pooled, 0.95)
    half = 2.7764451051977987 * np.sqrt(2 / 3)  # t(0.975, 4) * s * sqrt(1/3 + 1/3)
    assert (d.value, d.lo, d.hi, d.source) == pytest.approx((1.0, 1.0 - half, 1.0 + half, SEEDS))


def test_bootstrap_interval_is_the_percentiles_of_the_difference_of_draws():
    p = Samples([0.6], np.linspace(0.55, 0.65, 101))
    q = Samples([0.5, 0.52], np.full(101, 0.5))
    d = difference(p, q, Pooled.of([[0.5, 0.52]]), 0.9)
    assert d.source == "bootstrap" and (d.lo, d.hi) == pytest.approx((0.055, 0.145))
    assert difference(Samples([0.6], None), q, None, 0.9).source == "none"


@pytest.mark.parametrize("d_a, d_b, free, identified, noisy, expected", [
    (_d(-0.06, 0.01), None, None, True, False, ("lower ceiling", "", "")),
    (_d(0.03, 0.02), None, None, True, False, ("higher ceiling", "", "")),
    (_d(0.03, 0.05), None, None, True, False, ("unresolved", "interval straddles the margin", "more seeds")),
    # a bootstrap interval must lie wholly beyond the margin
    (_d(0.03, 0.015, "bootstrap"), None, None, True, False, ("unresolved", "one seed", "more seeds")),
    (_d(0.03, 0.005, "bootstrap"), None, None, True, False, ("higher ceiling", "", "")),
    (_d(0.0, 0.01), _d(-0.7, 0.3), _d(-0.6, 0.1), True, False, ("lower efficiency", "", "")),
    (_d(0.0, 0.01), _d(0.5, 0.3), _d(0.4, 0.1), True, False, ("higher efficiency", "", "")),
    # dB below the minimum effect (0.4), or not confirmed by the free fits: no finding
    (_d(0.0, 0.01), _d(-0.3, 0.2), _d(-0.3, 0.1), True, False, ("unresolved", "interval straddles the margin",
                                                               "more seeds")),
    (_d(0.0, 0.01), _d(-0.7, 0.3), _d(-0.05, 0.1), True, False, ("unresolved", "interval straddles the margin",
                                                                "more seeds")),
    (_d(0.001, 0.01), _d(0.05, 0.3), _d(0.0, 0.1), True, False, ("within margin", "", "")),
    (_d(0.001, 0.01), _d(0.05, 0.3), _d(0.0, 0.1), False, False, ("unresolved", "A not identified",
                                                                 "more compute")),
    (_d(0.01, 0.02), _d(0.05, 0.6), _d(0.0, 0.1), True, True, ("unresolved", "eval noise", "more eval samples")),
    (Difference(0.01, None, None, "none"), None, None, True, False, ("unresolved", "no interval", "more seeds")),
])
def test_verdict_branches(d_a, d_b, free, identified, noisy, expected):
    found = verdict(d_a, d_b, free, 0.02, 0.4, identified, noisy)
    assert (found.verdict, found.reason, found.needs) == expected


def test_minimum_effect_is_twice_the_seed_sd_with_a_floor():
    assert min_effect(0.2, 1.92) == pytest.approx(0.4)
    assert min_effect(0.01, 2.0) == pytest.approx(0.1)  # 5 % of the base's B
    assert min_effect(None, 2.0) is None


def test_eval_noise_flag_and_samples_needed():
    runs = [RunFit(sweep="s", variant=f"v{i}", status="ok", eval_se=se, eval_samples=1000) for i, se in
            enumerate((0.015, 0.02, 0.03))]
    noise = eval_noise(runs, "s", 0.02)
    assert noise.flagged and noise.median_se == 0.02 and noise.samples_needed == pytest.approx(4000)
    assert "about 4,000 eval samples (now 1,000)" in noise.describe()
    assert not eval_noise(runs[:1], "s", 0.04).flagged and eval_noise(runs, "other", 0.02) is None


def test_unresolved_verdicts_say_how_many_seeds_or_samples():
    # seed sd of A 0.02 at a 0.02 margin: 2 * (1.96 * 0.02 / 0.01)^2 = 30.7 -> 31 seeds per variant
    assert seeds_to_resolve(0.02, 0.02, 0.95) == 31
    assert seeds_to_resolve(0.001, 0.02, 0.95) == 2 and seeds_to_resolve(None, 0.02, 0.95) is None
    straddles = verdict(_d(0.03, 0.05), None, None, 0.02, 0.4, True, False, seeds_needed=31)
    assert straddles.needs == "more seeds (about 31 per variant)"
    noisy = verdict(_d(0.01, 0.02), _d(0.05, 0.6), _d(0.0, 0.1), 0.02, 0.4, True, True, 31, 2482.4)
    assert (noisy.reason, noisy.needs) == ("eval noise", "more eval samples (about 2,482 per eval), more seeds "
                                                         "(about 31 per variant)")
