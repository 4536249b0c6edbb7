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


def test_pool_removes_at_threshold_for_good():
    pool = NoPositiveResamplingPool(num_prompts=4, threshold=0.9, enabled=True)
    # prompt 0: 9 of 10 correct = 0.9 >= 0.9 -> removed. prompt 1: 8 of 10 = 0.8 -> stays.
    pool.update([0] * 10 + [1] * 10, torch.tensor([1.0] * 9 + [0.0] + [1.0] * 8 + [0.0] * 2))
    assert pool.pass_rate(0) == pytest.approx(0.9)
    assert pool.active() == [1, 2, 3]
    # Failures afterwards do not bring it back.
    pool.update(torch.tensor([0, 0, 0]), torch.zeros(3))
    assert pool.active() == [1, 2, 3]
    generator = torch.Generator().manual_seed(0)
    served = [p for _ in range(30) for p in pool.next_batch(2, generator)]
    assert 0 not in served
    assert set(served) == {1, 2, 3}


def test_pool_skips_a_prompt_removed_mid_epoch():
    pool = NoPositiveResamplingPool(num_prompts=6, threshold=0.9, enabled=True)
    generator = torch.Generator().manual_seed(1)
    first = pool.next_batch(2, generator)
    rest_of_epoch = pool.state_dict()["order"][2:]
    removed = rest_of_epoch[0]
    pool.update([removed], torch.ones(1))  # pass rate 1.0
    served = [p for _ in range(12) for p in pool.next_batch(2, generator)]
    assert removed not in served
    assert served[:3] == rest_of_epoch[1:]  # the epoch goes on without it
    assert removed not in first


def test_uniform_mode_never_removes():
    pool = NoPositiveResamplingPool(num_prompts=3, threshold=0.9, enabled=False)
    pool.update([0, 0, 1], torch.ones(3))
    assert pool.active() == [0, 1, 2]
    assert pool.pass_rate(0) == 1.0


def test_epochs_are_permutations_and_batches_cross_epochs():
    pool = NoPositiveResamplingPool(num_prompts=5, threshold=0.9, enabled=True)
    generator = torch.Generator().manual_seed(2)
    served = [p for _ in range(5) for p in pool.next_batch(3, generator)]  # 15 = 3 epochs of 5
    for epoch in range(3):
        assert sorted(served[5 * epoch:5 * epoch + 5]) == [0, 1, 2, 3, 4]
    assert pool.epoch == 3


def test_pool_exhausted():
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9, enabled=True)
    pool.update([0, 1], torch.ones(2))
    with pytest.raises(PoolExhausted):
        pool.next_batch(1, torch.Generator().manual_seed(0))


def test_update_rejects_plus_minus_one_rewards():
    pool = NoPositiveResamplingPool(num_prompts=2, threshold=0.9, enabled=True)
    with pytest.raises(ValueError, match="0, 1"):
        pool.update([0, 1], torch.tensor([1.0, -1.0]))


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (bool, int, float))


def _step(pool: NoPositiveResamplingPool, generator: torch.Generator) -> list[int]:
    """One training step: a batch of 3 prompts, 2 samples each; prompts 0, 4, 8 solve both (pass rate
    1, they leave the pool), the others one of two (pass rate 0.5, they stay)."""
    batch = pool.next_batch(3, generator)
    ids = [p for p in batch for _ in range(2)]
    correct = torch.tensor([float(p % 4 == 0 or sample == 0) for p in batch for sample in range(2)])
    pool.update(ids, correct)
    return batch


def test_resume_mid_epoch_matches_an_uninterrupted_run():
    def fresh() -> tuple[NoPositiveResamplingPool, torch.Generator]:
        return NoPositiveResamplingPool(num_prompts=11, threshold=0.9, enabled=True), \
            torch.Generator().manual_seed(1234)

    pool, generator = fresh()
    uninterrupted = [_step(pool, generator) for _ in range(12)]

    pool, generator = fresh()
    before = [_step(pool, generator) for _ in range(5)]
    state = pool.state_dict()
    assert 0 < state["position"] < len(state["order"])  # really mid-epoch
    assert _plain(state)
    buffer = io.BytesIO()
    torch.save({"pool": state, "generator": generator.get_state()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer)

    resumed_pool = NoPositiveResamplingPool(num_prompts=11, threshold=0.9, enabled=True)
    resumed_pool.load_state_dict(saved["pool"])
    resumed_generator = torch.Generator()
    resumed_generator.set_state(saved["generator"])
    after = [_step(resumed_pool, resumed_generator) for _ in range(7)]

    assert before + after == uninterrupted
    assert len(resumed_pool.active()) < 11  # the run did remove prompts
