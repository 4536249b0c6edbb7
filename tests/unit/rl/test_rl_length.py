"""Length control: the DAPO overlong penalty and the interruption budget."""
from __future__ import annotations

import pytest
import torch

from rlscale.rl import dapo_length_penalty
from rlscale.rl.length import InterruptionConfig, LengthConfig, PenaltyConfig


def test_dapo_length_penalty_values():
    # l_max 14, l_cache 2: penalty = clip((14 - L) / 2 - 1, -1, 0).
    #   L = 10: 4/2 - 1 = 1 -> 0;  L = 12: 2/2 - 1 = 0;  L = 13: 1/2 - 1 = -0.5;
    #   L = 14: 0 - 1 = -1;  L = 20: -6/2 - 1 = -4 -> -1;  L = 13 but incorrect: 0.
    lengths = torch.tensor([10, 12, 13, 14, 20, 13])
    correct = torch.tensor([True, True, True, True, True, False])
    got = dapo_length_penalty(lengths, correct, l_max=14, l_cache=2)
    assert got.tolist() == [0.0, 0.0, -0.5, -1.0, -1.0, 0.0]


def test_dapo_length_penalty_at_paper_scale():
    # l_max 14000, l_cache 2000: 12000 -> 2000/2000 - 1 = 0; 13000 -> 0.5 - 1 = -0.5;
    # 13500 -> 0.25 - 1 = -0.75; 16384 -> -2384/2000 - 1 = -2.192 -> -1.
    got = dapo_length_penalty(torch.tensor([12000, 13000, 13500, 16384]), torch.ones(4, dtype=torch.bool),
                              l_max=14000, l_cache=2000)
    assert got.tolist() == [0.0, -0.5, -0.75, -1.0]


def test_dapo_length_penalty_rejects_bad_cache():
    with pytest.raises(ValueError, match="l_cache"):
        dapo_length_penalty(torch.tensor([1]), torch.tensor([True]), l_max=4, l_cache=8)


def test_interruption_budgets_range_and_determinism():
    """One budget per trace, uniform over the window with both ends; the same seed, the same budgets."""
    window = InterruptionConfig(window=[10, 12])
    draws = window.think_budgets(300, 99, torch.Generator().manual_seed(0))
    assert draws.dtype == torch.long and set(draws.tolist()) == {10, 11, 12}  # both ends, nothing outside
    assert torch.equal(window.think_budgets(300, 99, torch.Generator().manual_seed(0)), draws)
    assert set(InterruptionConfig(window=[5, 5]).think_budgets(4, 99, torch.Generator()).tolist()) == {5}
    assert window.longest_think(99) == 12


def test_without_interruption_every_trace_thinks_to_the_generations_budget():
    rng = torch.Generator().manual_seed(0)
    for cfg in (LengthConfig(), PenaltyConfig()):
        assert cfg.think_budgets(3, 40, rng).tolist() == [40, 40, 40] and cfg.longest_think(40) == 40
    assert rng.initial_seed() == 0 and torch.equal(rng.get_state(), torch.Generator().manual_seed(0).get_state())
