"""The verdict rules and the intervals behind them (rlscale.fit.verdicts, rlscale.fit.pairing,
rlscale.fit.noise), on hand-computed numbers: every branch of the LOO verdict, the paired and unpaired
seed intervals, one-seed variants, and the eval-noise share with its cure in distinct prompts."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlscale.fit.noise import eval_noise
from rlscale.fit.pairing import SeedTable, variance_share
from rlscale.fit.results import Difference, RunFit
from rlscale.fit.verdicts import Resolution, prompts_to_resolve, seeds_to_resolve, verdict

PAIRED = "paired n=3"
T975_4 = 2.7764451051977987  # t(0.975, 4)


def _d(value, half, source=PAIRED):
    return Difference(value, value - half, value + half, source)


def test_unpaired_interval_is_the_pooled_t_interval_by_hand():
    table = SeedTable.of({"p": {0: 1.0, 1: 2.0, 2: 3.0}, "q": {3: 0.0, 4: 1.0, 5: 2.0}, "r": {6: 5.0}})
    assert (table.unpaired.sd, table.unpaired.df) == (1.0, 4)  # the one-seed variant adds nothing
    d = table.difference("p", "q", 0.95)  # no common seed: unpaired
    half = T975_4 * math.sqrt(2 / 3)
    assert (d.value, d.lo, d.hi, d.source) == pytest.approx((1.0, 1.0 - half, 1.0 + half, "unpaired n=3"))


def test_paired_interval_cancels_the_seed_effect():
    # value = mu_v + seed effect + e: the seed effects (0, 1, -1) are shared, e is small
    seeds = {0: 0.0, 1: 1.0, 2: -1.0}
    e = {"p": (0.01, -0.01, 0.0), "q": (0.0, 0.01, -0.01), "r": (-0.01, 0.0, 0.01)}
    mu = {"p": 0.6, "q": 0.55, "r": 0.6}
    table = SeedTable.of({v: {s: mu[v] + seeds[s] + e[v][s] for s in seeds} for v in mu})
    d = table.difference("p", "q", 0.95)
    assert d.source == "paired n=3" and d.value == pytest.approx(0.05)
    # additive model by hand: 9 cells, rank 3 + 3 - 1 = 5, df 4; residual = e here (e sums to 0 both ways)
    sd = math.sqrt(sum(x * x for v in e.values() for x in v) / 4)
    assert (table.paired.sd, table.paired.df) == (pytest.approx(sd), 4)
    half = T975_4 * sd * math.sqrt(2 / 3)
    assert (d.lo, d.hi) == pytest.approx((0.05 - half, 0.05 + half))
    assert d.excludes_zero()  # unpaired, the seed sd of 1 would swamp it
    assert not SeedTable.of(table.values, pairing=False).difference("p", "q", 0.95).excludes_zero()


def test_a_one_seed_variant_borrows_the_sweeps_spread_and_none_gives_no_interval():
    values = {"base": {0: 0.60, 1: 0.62, 2: 0.58}, "a": {0: 0.59, 1: 0.61, 2: 0.58}, "one": {0: 0.50}}
    table = SeedTable.of(values)
    d = table.difference("one", "base", 0.95)
    assert d.source == "paired n=1" and d.value == pytest.approx(-0.10) and d.has_interval
    alone = SeedTable.of({"base": {0: 0.60}, "one": {0: 0.50}})
    assert not alone.difference("one", "base", 0.95).has_interval
    found = verdict(alone.difference("one", "base", 0.95), None, None, 0.02, 0.2, True)
    assert (found.verdict, found.reason) == ("unresolved", "one seed")


@pytest.mark.parametrize("d_a, d_b, free, identified, expected", [
    (_d(-0.06, 0.01), None, None, True, ("lower ceiling", "", "")),
    (_d(0.03, 0.02), None, None, True, ("higher ceiling", "", "")),
    (_d(0.03, 0.05), None, None, True, ("unresolved", "seed spread", "more seeds")),
    (_d(0.0, 0.01), _d(-0.24, 0.2), _d(-0.2, 0.1), True, ("lower efficiency", "", "")),  # no minimum effect
    (_d(0.0, 0.01), _d(0.5, 0.3), _d(0.4, 0.1), True, ("higher efficiency", "", "")),
    # dB resolved but the free fits' B does not differ: not a finding, and never "within margin"
    (_d(0.0, 0.01), _d(-0.3, 0.2), _d(-0.05, 0.1), True,
     ("unresolved", "dB resolved but not the free fits' B", "more seeds")),
    (_d(0.001, 0.01), _d(0.05, 0.1), _d(0.0, 0.1), True, ("within margin", "", "")),
    # dB interval wider than the band: not resolved as equal
    (_d(0.001, 0.01), _d(0.05, 0.3), _d(0.0, 0.1), True, ("unresolved", "seed spread", "more seeds")),
    (_d(0.001, 0.01), _d(0.05, 0.1), _d(0.0, 0.1), False, ("unresolved", "A not identified", "more compute")),
])
def test_verdict_branches(d_a, d_b, free, identified, expected):
    found = verdict(d_a, d_b, free, 0.02, 0.2, identified)
    assert (found.verdict, found.reason, found.needs) == expected


def test_unresolved_reasons_in_the_order_of_their_share_with_what_resolves_each():
    # seed sd of dA's spread 0.02 at a 0.02 margin: 2 * (1.96 * 0.02 / 0.01)^2 = 30.7 -> 31 seeds per variant
    assert seeds_to_resolve(0.02, 0.02, 0.95) == 31
    assert seeds_to_resolve(0.001, 0.02, 0.95) == 2 and seeds_to_resolve(None, 0.02, 0.95) is None
    # 3 seeds, sd 0.01, eval share 0.9: keep (0.01^2 * 3) / (2 * 1.96^2 * 0.01^2) = 0.390 of the variance;
    # 1 - 0.9 + 0.9 / k = 0.390 -> k = 3.10 -> 400 prompts become about 1,241
    allowed = 0.01 ** 2 * 3 / (2 * 1.959963984540054 ** 2 * 0.01 ** 2)
    assert prompts_to_resolve(0.01, 0.9, 3, 400, 0.02, 0.95) == pytest.approx(400 * 0.9 / (allowed - 0.1))
    assert prompts_to_resolve(0.01, 0.2, 3, 400, 0.02, 0.95) is None  # eval noise alone cannot
    noisy = verdict(_d(0.01, 0.03), None, None, 0.02, 0.2, True, Resolution(seeds=9, prompts=1241.0, eval_share=0.9))
    assert (noisy.reason, noisy.needs) == ("eval noise (90% of the variance)",
                                           "more distinct eval prompts (about 1,241 per eval), more seeds "
                                           "(about 9 per variant)")
    seedy = verdict(_d(0.01, 0.03), None, None, 0.02, 0.2, True, Resolution(seeds=9, eval_share=0.14))
    assert (seedy.reason, seedy.needs) == ("seed spread (86% of the variance)", "more seeds (about 9 per variant)")


def test_eval_noise_share_and_cure_in_distinct_prompts():
    runs = [RunFit(sweep="s", variant=v, seed=s, status="ok", A=a, A_identified=True, A_se_within=0.01,
                   eval_se=0.02, eval_prompts=58)
            for v, seeds in {"x": (0.60, 0.62, 0.64), "y": (0.58, 0.61, 0.66)}.items() for s, a in enumerate(seeds)]
    noise = eval_noise(runs, "s", 0.02)
    spread = SeedTable.of({"x": {0: 0.60, 1: 0.62, 2: 0.64}, "y": {0: 0.58, 1: 0.61, 2: 0.66}}).unpaired
    assert noise.share == pytest.approx(min(1.0, 0.01 ** 2 / spread.sd ** 2))
    assert noise.flagged is False  # a run's A has SE 0.01, half the margin
    assert noise.prompts_needed == pytest.approx(58)
    assert variance_share([0.01, 0.02, 0.03], None) is None
    assert eval_noise(runs, "other", 0.02) is None
    assert np.isfinite(spread.sd)
    # an interval cut off at 1 measures the range, not the run's noise: its width is left out
    open_run = RunFit(sweep="s", variant="x", seed=3, status="ok", A=0.7, A_identified=False, A_interval_open=True,
                      A_se_within=0.2, eval_se=0.02, eval_prompts=58)
    assert eval_noise([*runs, open_run], "s", 0.02).a_se == pytest.approx(0.01)
    assert eval_noise([open_run], "s", 0.02) is None


def test_a_drift_within_runs_asks_for_seeds_not_eval_prompts():
    """The runs' own noise is all of the spread, but the eval's sampling is 2 % of it (the reward drifts between
    evals): more eval prompts cannot resolve it, more seeds can; with sampling 90 % the prompts are asked first."""
    from rlscale.fit.results import DRIFT, EVAL_NOISE, EvalNoise
    d_a = Difference(0.005, -0.040, 0.051, "paired n=2")
    drift = verdict(d_a, None, None, 0.02, None, True, Resolution(seeds=14, prompts=None, eval_share=1.0,
                                                                  sampling=0.02))
    assert drift.reason == f"{DRIFT} (100% of the variance, the eval's sampling 2% of it)"
    assert drift.needs == "more seeds (about 14 per variant)"
    sampled = verdict(d_a, None, None, 0.02, None, True, Resolution(seeds=14, prompts=9000, eval_share=1.0,
                                                                    sampling=0.9))
    assert sampled.reason.startswith(EVAL_NOISE) and sampled.needs.startswith("more distinct eval prompts")
    # the prompts asked for count only the sampling part: at 2 % of the variance no number of them suffices
    assert prompts_to_resolve(0.0217, 0.02, 2, 4500, 0.02, 0.95) is None
    noise = EvalNoise(sweep="s", median_se=0.0074, a_se=0.0217, limit=0.01, eval_prompts=4500, share=1.0,
                      sampling=0.02)
    assert noise.prompts_needed is None and "no number of eval prompts resolves it alone" in noise.describe()
    # all sampling: the variance falls as 1 / prompts, 4,500 x (0.0217 / 0.01)^2 = 21,190
    assert EvalNoise("s", 0.0074, 0.0217, 0.01, 4500, 1.0, 1.0).prompts_needed == pytest.approx(21190.05)
