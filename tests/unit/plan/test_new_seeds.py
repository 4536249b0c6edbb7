"""The parts of a plan's check with numbers known in closed form: the prediction interval of a mean of later
runs (rlscale.plan.new_seeds), a run's reward read at the budget (rlscale.plan.observed) and Holm's
step-down (rlscale.fit.family.holm_adjusted)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from rlscale.fit.family import holm_adjusted
from rlscale.plan.new_seeds import mean_interval
from rlscale.plan.observed import at_budget


def _half(lo_hi):
    lo, hi = lo_hi
    return (hi - lo) / 2


def test_new_seeds_add_their_spread_their_eval_noise_and_the_plans_own_uncertainty():
    """k new seeds: t(df) sqrt(sd^2/k + sd^2/N + eval variance / k^2); more new seeds narrow it towards
    t sd / sqrt(N), never below the seen seeds' interval."""
    sd, df, seen, eval_var = 0.02, 6, 3, 0.01 ** 2 / 3
    q = student_t.ppf(0.975, df)
    for k in (1, 3, 10):
        expected = q * math.sqrt(sd ** 2 / k + sd ** 2 / seen + k * eval_var / k ** 2)
        assert _half(mean_interval(0.6, sd, df, seen, k, 0, k * eval_var, 0.95)) == pytest.approx(expected)
    assert _half(mean_interval(0.6, sd, df, seen, 3, 0, 0.0, 0.95)) > q * sd / math.sqrt(seen)


def test_the_seen_seeds_extended_carry_no_new_seed_spread():
    """All N seen seeds run past the budget: their seed offsets are in the plan's mean already, so only the
    plan's own uncertainty sd^2/N and the eval noise remain; one of three extended sits in between."""
    sd, df = 0.02, 6
    q = student_t.ppf(0.975, df)
    assert _half(mean_interval(0.6, sd, df, 3, 0, 3, 0.0, 0.95)) == pytest.approx(q * sd / math.sqrt(3))
    one = _half(mean_interval(0.6, sd, df, 3, 0, 1, 0.0, 0.95))
    assert q * sd / math.sqrt(3) < one < _half(mean_interval(0.6, sd, df, 3, 1, 0, 0.0, 0.95))


def test_the_reward_at_the_budget_is_the_mean_of_the_evals_around_it_read_along_their_line():
    x = np.arange(0.0, 10.5, 1.0)
    line = 0.3 + 0.02 * x
    centred = at_budget(x, line + np.array([0, 0, 0, 0, 0, 0, 0, .01, -.02, .04, 0]), np.full(x.size, 0.01), 8.0)
    assert centred.value == pytest.approx(np.mean(line[7:10]) + 0.01) and centred.factor == pytest.approx(1 / 3)
    assert centred.eval_variance == pytest.approx(1e-4) and centred.evals == 3
    ends_there = at_budget(x, line, np.empty(0), 10.0)  # evals at 8, 9, 10: interpolated, not their mean
    assert ends_there.value == pytest.approx(0.5) and ends_there.factor == pytest.approx(1 / 3 + 1 / 2)
    assert ends_there.eval_variance is None
    assert at_budget(x, line, np.empty(0), 10.5) is None  # not reached


def test_holm_steps_down_and_stops_at_the_first_p_value_above_its_threshold():
    def rejected(p_values):
        return [p is not None and p <= 0.05 for p in holm_adjusted(p_values)]

    assert rejected([0.01, 0.04, 0.03, None]) == [True, False, False, False]  # 0.01 < .05/3, 0.03 > .05/2
    assert rejected([0.01, 0.02, 0.04]) == [True, True, True]  # .01 < .0167, .02 < .025, .04 < .05
    assert rejected([0.2, 0.001]) == [False, True]
    adjusted = holm_adjusted([0.01, 0.04, 0.03, None])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjusted[3] is None
