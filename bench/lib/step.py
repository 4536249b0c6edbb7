"""rlscale's RL step around a synthetic task and a random-weight model: the parts a run builds
(``rlscale.train.components.assemble_components``: generator rows and activation checkpointing resolved on the
device, the learner compiled for the longest sequence, the rollout source of ``offpolicy.name``) and one step of
``RunLoop.update`` without its logging."""
from __future__ import annotations

from pathlib import Path

import torch

from lib.workloads import BenchTask, BenchTokenizer, Workload
from rlscale.config.schema import RunConfig
from rlscale.train.components import Components, assemble_components
from rlscale.train.loop import prepare_batch


def components(cfg: RunConfig, model: torch.nn.Module, work: Workload, run_dir: Path) -> Components:
    """The run's parts for ``cfg`` around ``model`` (random weights) and the bench task of ``work``."""
    tok = BenchTokenizer(model.config.vocab_size)
    return assemble_components(cfg, BenchTask(tok, work), model, tok, torch.device(cfg.engine.device), run_dir)


def rl_step(c: Components, step: int):
    """``RunLoop.update`` without its logging: next batch, filters and advantages, one update, publish."""
    groups = c.source.next_batch(step)
    batch, advantages, weights, _ = prepare_batch(groups, c)
    result = c.learner.step(batch, advantages, weights)
    c.source.after_update(c.model, step + 1)
    return groups, result
