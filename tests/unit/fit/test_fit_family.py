"""Family-wise error control (rlscale.fit.family): Holm's adjusted p-values by hand, the p-value of a
difference against a margin, the level a family leaves one comparison, and a difference read at another
level."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student_t

from rlscale.fit.family import BONFERRONI, HOLM, NO_CORRECTION, adjusted, family, holm_adjusted, p_beyond
from rlscale.fit.results import Difference
from rlscale.fit.verdicts import ceiling_p, ceiling_resolved, efficiency_p


def test_holm_adjusts_by_rank_and_keeps_the_order():
    # sorted 0.001, 0.01, 0.02, 0.04 of m = 4: 4 x 0.001, 3 x 0.01, max(0.03, 2 x 0.02), max(0.04, 0.04)
    assert holm_adjusted([0.02, 0.001, 0.04, 0.01]) == pytest.approx([0.04, 0.004, 0.04, 0.03])
    assert holm_adjusted([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm_adjusted([]) == []


def test_a_family_states_its_rule_size_and_level():
    loo = family("3 reverted axes against the base", 6, 0.95, HOLM, fixed=True)
    assert loo.method == HOLM and loo.per_test == pytest.approx(0.05 / 6)
    assert loo.describe().startswith("Holm over 6 comparisons (3 reverted axes against the base): any false "
                                     "finding in the table at most 5%, each comparison at 0.0083 or less")
    tiers = family("tiers", 4, 0.95, HOLM, fixed=False)
    assert tiers.method == BONFERRONI and adjusted([0.01, None], tiers) == [0.04, None]
    alone = family("tiers", 4, 0.95, NO_CORRECTION, fixed=False)
    assert alone.per_test == pytest.approx(0.05) and adjusted([0.01], alone) == [0.01]
    assert "each at 5% alone" in alone.describe()


def test_p_beyond_is_the_t_tests_and_agrees_with_the_interval():
    se, df = 0.01, 8
    d = Difference(0.03, None, None, "paired n=3", se=se, df=df).at_level(0.95)
    assert d.hi - d.lo == pytest.approx(2 * student_t.ppf(0.975, df) * se)
    p = p_beyond(d, 0.0)
    assert p == pytest.approx(2 * student_t.sf(3.0, df))
    # the interval at level 1 - p just reaches 0
    assert d.at_level(1 - p).lo == pytest.approx(0.0, abs=1e-12)
    assert ceiling_p(d, 0.02) == pytest.approx(p) and ceiling_p(d, 0.05) == 1.0  # within the margin: no test
    assert ceiling_resolved(d, 0.02) and not ceiling_resolved(d, 0.02, level=1 - p / 2)


def test_a_bootstrap_differences_p_value_is_the_share_of_draws_past_the_margin():
    draws = tuple(np.linspace(0.0, 0.1, 101))  # 0.00, 0.001, ..., 0.1
    d = Difference(0.05, 0.0025, 0.0975, "bootstrap", draws=draws)
    assert p_beyond(d, 0.02) == pytest.approx(2 * 21 / 101)  # draws <= 0.02
    assert d.at_level(0.5).lo == pytest.approx(np.percentile(draws, 25))


def test_an_efficiency_finding_takes_the_larger_of_its_two_p_values():
    d_b = Difference(-0.3, None, None, "paired n=3", se=0.1, df=10)
    d_free = Difference(-0.3, None, None, "paired n=3", se=0.12, df=10)
    d_b, d_free = d_b.at_level(0.95), d_free.at_level(0.95)
    assert efficiency_p(d_b, d_free) == pytest.approx(2 * student_t.sf(2.5, 10))
    assert efficiency_p(d_b, Difference(0.3, 0.1, 0.5, "paired n=3", se=0.1, df=10)) == 1.0  # signs differ
