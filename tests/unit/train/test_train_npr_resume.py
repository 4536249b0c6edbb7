"""The No-Positive-Resampling pool in a run's checkpoint: its state comes back exactly, and a checkpoint
whose pool state holds cumulative pass rates is refused in one line before anything is written."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlscale.rl import NoPositiveResamplingPool
from rlscale.train.checkpoint import CHECKPOINT, ResumeRefused, RunIdentity, load_checkpoint, save_checkpoint
from rlscale.train.loop import RunLoop


IDENTITY = RunIdentity(config="0" * 64, seed=0, run="run")


class Stateless:
    def load_state_dict(self, state) -> None:
        pass


def played_pool() -> NoPositiveResamplingPool:
    """A pool mid-way through its third epoch, prompts 0 and 3 removed after their second visit."""
    pool = NoPositiveResamplingPool(num_prompts=6, threshold=0.9, window=2)
    generator = torch.Generator().manual_seed(5)
    for _ in range(14):
        batch = pool.next_batch(1, generator)
        pool.update(batch, torch.full((1, 4), float(batch[0] % 3 == 0)))
    return pool


def fake_loop(run_dir: Path, pool: NoPositiveResamplingPool) -> SimpleNamespace:
    comps = SimpleNamespace(model=Stateless(), learner=Stateless(), source=Stateless(), meter=Stateless(),
                            rng=torch.Generator(), pool=pool)
    return SimpleNamespace(run_dir=run_dir, identity=IDENTITY, comps=comps, metrics_path=run_dir / "metrics.jsonl",
                           samples_path=run_dir / "samples.jsonl", step=0)


def checkpoint(run_dir: Path, pool_state: dict) -> None:
    save_checkpoint(run_dir, {"step": 3, "model": {}, "learner": {}, "rng": torch.Generator().get_state(),
                              "torch_rng": torch.get_rng_state(), "pool": pool_state, "source": {},
                              "compute": {}, "metrics_bytes": 0, "samples_bytes": 0}, IDENTITY)


def test_the_pool_state_round_trips_through_a_checkpoint(tmp_path):
    pool = played_pool()
    assert 0 < pool.state_dict()["position"] < len(pool.state_dict()["order"])
    assert (pool.epoch, pool.active()) == (3, [1, 2, 4, 5])
    checkpoint(tmp_path, pool.state_dict())
    restored = NoPositiveResamplingPool(num_prompts=6, threshold=0.9, window=2)
    restored.load_state_dict(load_checkpoint(tmp_path, IDENTITY)["pool"])
    assert restored.state_dict() == pool.state_dict()
    a, b = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert [pool.next_batch(3, a) for _ in range(4)] == [restored.next_batch(3, b) for _ in range(4)]


def test_a_checkpoint_with_cumulative_pass_rates_is_refused_in_one_line(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 0, "kind": "eval"}\n{"step": 3, "kind": "train"}\n')
    checkpoint(tmp_path, {"num_prompts": 6, "successes": [4.0] * 6, "samples": [8] * 6, "removed": [False] * 6,
                          "order": [0, 1, 2, 3, 4, 5], "position": 2, "epoch": 1})
    with pytest.raises(ResumeRefused) as err:
        RunLoop.restore(fake_loop(tmp_path, NoPositiveResamplingPool(num_prompts=6)))
    message = str(err.value)
    assert message.startswith(f"{tmp_path / CHECKPOINT}: the No-Positive-Resampling state holds cumulative pass "
                              "rates") and message.endswith("start over with --force") and "\n" not in message
    assert metrics.read_text().count("\n") == 2  # nothing was cut
