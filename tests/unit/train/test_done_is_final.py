"""A run's terminal state is final: a run that ended done early, because No-Positive-Resampling removed every
prompt (Sec. 3.2), is sealed at the step it ended at, and a rerun of its folder trains nothing and changes
no file; only a larger trainer.max_steps (an explicit extension) resumes it.

The tiny random-weight model never answers correctly, so the test makes every sample count as correct in
the pool's bookkeeping (``NoPositiveResamplingPool.update`` fed ones): each prompt then leaves after its
first visit and the pool empties at the start of the second epoch, as it would for a model that solves them.
"""
from __future__ import annotations

import json

import pytest
import torch

from rlscale.rl import NoPositiveResamplingPool
from rlscale.train.checkpoint import sealed_step
from rlscale.train.entry import finished, prepare_run_dir, train_run_dir

TINY = ["model.warmup_steps=2", "trainer.max_steps=20", "trainer.eval_every=5", "trainer.checkpoint_every=5",
        "task.val_size=4", "task.train_size=4", "trainer.eval_samples=1", "batch.prompts=2",
        "batch.generations=2", "offpolicy=ppo", "offpolicy.batches_per_version=1", "engine.threads=1"]


@pytest.fixture
def solved_pool(monkeypatch):
    update = NoPositiveResamplingPool.update
    monkeypatch.setattr(NoPositiveResamplingPool, "update",
                        lambda self, batch, correct: update(self, batch, torch.ones_like(correct)))


def files(run_dir):
    return {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}


def test_a_run_that_stopped_early_stays_done(tmp_path, solved_pool, monkeypatch):
    run_dir, cfg = prepare_run_dir([f"out={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}", *TINY])
    from rlscale.config import typed

    assert train_run_dir(run_dir, cfg=typed(cfg)) == "done"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "done" and status["step"] == 2 and status["stopped_early"] is True
    assert status["reason"].startswith("stopped early:") and status["max_steps"] == 20
    assert sealed_step(run_dir) == 2 and finished(run_dir, 20) and not finished(run_dir, 21)
    before = files(run_dir)
    monkeypatch.undo()
    assert train_run_dir(run_dir) == "done"  # the rerun a sweep makes: nothing trained, nothing written
    assert files(run_dir) == before
