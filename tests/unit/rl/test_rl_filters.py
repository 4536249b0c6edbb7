"""Zero-variance filtering, dynamic-sampling selection and the No-Positive-Resampling pool."""
from __future__ import annotations

import io

import pytest
import torch

from rlscale.rl import (NoPositiveResamplingPool, PoolExhausted, select_groups_with_signal,
                        zero_variance_keep)


def test_zero_variance_keep_and_groups_with_signal():
    # group 5: (1, 1, 1) identical; group 2: (1, -1, 1) varies; group 9: (-1, -1, -1) identical.
    # Interleaved on purpose.
    rewards = torch.tensor([1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
    groups = torch.tensor([5, 2, 9, 5, 2, 9, 5, 2, 9])
    keep = zero_variance_keep(rewards, groups)
    assert keep.tolist() == [False, True, False, False, True, False, False, True, False]
    assert select_groups_with_signal(rewards, groups) == [2]


def test_groups_with_signal_are_listed_ascending():
    rewards = torch.tensor([0.0, 1.0, 0.5, 0.5, 1.0, 0.0])
    groups = torch.tensor([8, 8, 4, 4, 1, 1])
    assert select_groups_with_signal(rewards, groups) == [1, 8]
    assert zero_variance_keep(rewards, groups).tolist() == [True, True, False, False, True, True]


def visit(pool: NoPositiveResamplingPool, prompt: int, correct: int, samples: int = 8) -> None:
    """Record one visit of ``prompt``: ``correct`` of ``samples`` samples right."""
    pool.update([prompt], torch.tensor([[1.0] * correct + [0.0] * (samples - correct)]))


def test_a_prompt_that_starts_unsolved_and_becomes_solved_is_removed():
    pool = NoPositiveResamplingPool(num_prompts=3, threshold=0.9)
    visit(pool, 0, 0)
    visit(pool, 0, 0)
    assert pool.active() == [0, 1, 2]
    visit(pool, 0, 8)  # 8 of 24 since the start (0.33); its latest epoch: 8/8
    assert pool.pass_rate(0) == 1.0
    assert pool.active() == [1, 2]
    visit(pool, 0, 0)  # failures afterwards do not bring it back
    assert pool.active() == [1, 2]


@pytest.mark.parametrize("correct, samples, removed", [(17, 20, False), (9, 10, True), (7, 8, False)])
def test_the_recent_pass_rate_is_compared_with_the_threshold(correct, samples, removed):
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9)
    visit(pool, 1, 0, samples)
    visit(pool, 1, correct, samples)  # recent 0.85 is kept, 0.9 is removed, 7/8 = 0.875 is kept
    assert pool.pass_rate(1) == pytest.approx(correct / samples)
    assert (1 not in pool.active()) == removed


def test_a_window_pools_the_last_visits_and_judges_a_full_one():
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9, window=2)
    visit(pool, 0, 8)
    assert pool.active() == [0, 1]  # one visit of the two the window needs
    visit(pool, 1, 0)
    visit(pool, 1, 8)
    assert (pool.pass_rate(1), pool.active()) == (0.5, [0, 1])
    visit(pool, 1, 7)  # the last two visits: 15 of 16
    assert pool.pass_rate(1) == pytest.approx(15 / 16)
    visit(pool, 0, 6)  # 14 of 16 = 0.875
    assert pool.active() == [0]


def test_a_removal_takes_effect_from_the_next_epoch():
    pool = NoPositiveResamplingPool(num_prompts=6, threshold=0.9)
    generator = torch.Generator().manual_seed(1)
    first = pool.next_batch(2, generator)
    rest_of_epoch = pool.state_dict()["order"][2:]
    removed = first[0]
    visit(pool, removed, 8)
    later = rest_of_epoch[0]
    visit(pool, later, 8)  # removed before its turn in this epoch
    assert pool.active() == sorted(set(range(6)) - {removed, later})
    assert pool.next_batch(4, generator) == rest_of_epoch  # the epoch under way keeps its order
    served = [p for _ in range(12) for p in pool.next_batch(2, generator)]
    assert set(served) == set(pool.active())  # every later epoch leaves both out
    assert pool.epoch == 7


def test_uniform_mode_never_removes():
    pool = NoPositiveResamplingPool(num_prompts=3, threshold=0.9, enabled=False)
    visit(pool, 0, 8)
    assert pool.active() == [0, 1, 2]
    assert pool.pass_rate(0) == 1.0


def test_epochs_are_permutations_and_batches_cross_epochs():
    pool = NoPositiveResamplingPool(num_prompts=5, threshold=0.9, enabled=True)
    generator = torch.Generator().manual_seed(2)
    served = [p for _ in range(5) for p in pool.next_batch(3, generator)]  # 15 = 3 epochs of 5
    for epoch in range(3):
        assert sorted(served[5 * epoch:5 * epoch + 5]) == [0, 1, 2, 3, 4]
    assert pool.epoch == 3


def test_pool_exhausted_when_the_next_epoch_has_no_prompt():
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9, enabled=True)
    generator = torch.Generator().manual_seed(0)
    first = pool.next_batch(1, generator)
    pool.update([0, 1], torch.ones(2, 4))
    assert pool.active() == []
    assert pool.next_batch(1, generator) == [1 - first[0]]  # the epoch under way is served to its end
    with pytest.raises(PoolExhausted) as err:
        pool.next_batch(1, generator)
    assert str(err.value) == ("No-Positive-Resampling removed all 2 prompts (recent pass rate >= 0.9); the "
                              "training set is solved")


def test_update_rejects_plus_minus_one_rewards_and_flat_samples():
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9, enabled=True)
    with pytest.raises(ValueError, match="0, 1"):
        pool.update([0, 1], torch.tensor([[1.0], [-1.0]]))
    with pytest.raises(ValueError, match=r"\[P, G\]"):
        pool.update([0, 0, 1], torch.ones(3))


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (bool, int, float))


def _step(pool: NoPositiveResamplingPool, generator: torch.Generator) -> list[int]:
    """One training step: a batch of 3 prompts, 2 samples each; prompts 0, 4, 8 fail both on their first
    visit and solve both afterwards (their recent pass rate reaches 1, they leave the pool), the others
    solve one of two (0.5, they stay)."""
    batch = pool.next_batch(3, generator)
    seen = [pool.state_dict()["visits"][p] for p in batch]
    pool.update(batch, torch.tensor([[float(p % 4 != 0 or bool(v)), float(p % 4 == 0 and bool(v))]
                                     for p, v in zip(batch, seen)]))
    return batch


@pytest.mark.parametrize("window", [1, 2])
def test_resume_mid_epoch_matches_an_uninterrupted_run(window):
    def fresh() -> tuple[NoPositiveResamplingPool, torch.Generator]:
        return NoPositiveResamplingPool(num_prompts=11, threshold=0.9, window=window), \
            torch.Generator().manual_seed(1234)

    pool, generator = fresh()
    uninterrupted = [_step(pool, generator) for _ in range(16)]
    final = pool.state_dict()

    pool, generator = fresh()
    before = [_step(pool, generator) for _ in range(5)]
    state = pool.state_dict()
    assert 0 < state["position"] < len(state["order"])  # really mid-epoch
    assert _plain(state)
    buffer = io.BytesIO()
    torch.save({"pool": state, "generator": generator.get_state()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer)

    resumed_pool = NoPositiveResamplingPool(num_prompts=11, threshold=0.9, window=window)
    resumed_pool.load_state_dict(saved["pool"])
    resumed_generator = torch.Generator()
    resumed_generator.set_state(saved["generator"])
    after = [_step(resumed_pool, resumed_generator) for _ in range(11)]

    assert before + after == uninterrupted
    assert resumed_pool.state_dict() == final
    assert resumed_pool.active() == [1, 2, 3, 5, 6, 7, 9, 10]  # the run did remove prompts 0, 4 and 8


def test_a_state_without_per_visit_history_is_refused_in_one_line():
    pool = NoPositiveResamplingPool(num_prompts=2)
    cumulative = {"num_prompts": 2, "successes": [8.0, 0.0], "samples": [8, 8], "removed": [True, False],
                  "order": [1, 0], "position": 1, "epoch": 1}
    with pytest.raises(ValueError, match="cumulative pass rates") as err:
        pool.load_state_dict(cumulative)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="window 2, this run 1"):
        pool.load_state_dict(NoPositiveResamplingPool(num_prompts=2, window=2).state_dict())
