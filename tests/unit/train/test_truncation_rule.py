"""The instability rule of the truncation rate (rlscale.runfolder.truncation): a default that truncates 11 %
by design never signals, nor does a rate that starts high and falls; a rate that rises back above 10 % does."""
from __future__ import annotations

import numpy as np

from rlscale.runfolder.truncation import LEVEL, WINDOW, first_signal


def _batches(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Truncation rates of batches of 8 prompts x 8 completions, each prompt's rate drawn around ``p``."""
    per_prompt = rng.beta(3 * p[:, None], 3 * (1 - p[:, None]), size=(len(p), 8))
    return rng.binomial(8, per_prompt).sum(axis=1) / 64


def test_a_steady_rate_above_the_level_never_signals():
    rng = np.random.default_rng(0)
    assert LEVEL == 0.10 and WINDOW == 20
    runs = [_batches(np.full(60, 0.11), rng) for _ in range(20)]  # 20 LOO runs of the default
    assert sum(max(rates) > LEVEL for rates in runs) == 20  # every run has batches above 10 %
    assert [first_signal(rates) for rates in runs] == [None] * 20


def test_a_falling_start_never_signals_and_a_rise_does():
    rng = np.random.default_rng(1)
    falling = _batches(np.geomspace(0.8, 0.01, 100), rng)
    assert first_signal(falling) is None
    rising = np.concatenate([np.full(40, 0.02), np.linspace(0.02, 0.3, 40)])
    at = first_signal(rising)
    assert at is not None and 40 < at < 80 and rising[at - WINDOW + 1:at + 1].mean() > LEVEL
