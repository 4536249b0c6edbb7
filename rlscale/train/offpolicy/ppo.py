"""PPO-off-policy-k (Section 3.1): the trainer makes k updates on completions of one policy version,
generated just before each update with that version's weights swapped in."""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import List, Optional

import torch

from rlscale.train.batch import ScoredGroup
from rlscale.train.offpolicy.kept_policy import KeptPolicy
from rlscale.train.offpolicy.configs import PPOConfig
from rlscale.train.offpolicy.source import SourceInputs
from rlscale.train.rollouts import RolloutSampler


class PPOOffPolicySource:
    """PPO-off-policy-k (Section 3.1): the trainer makes k updates of B prompts each on completions of one
    policy version, the version at the block's first update. Each batch is generated just before its
    update, with that version's weights swapped in (``rlscale.train.offpolicy.kept_policy``), so every step
    generates one batch. k <= 1 is on-policy."""

    def __init__(self, sampler: RolloutSampler, prompts_per_batch: int, k: int, model: torch.nn.Module):
        self.sampler = sampler
        self.prompts = prompts_per_batch
        self.k = max(1, k)
        self.kept = KeptPolicy(model) if self.k > 1 else None
        self.block_version = 0
        self.left = 0  # batches still to draw from ``block_version``
        self.generate_s = 0.0
        self.since: Optional[float] = None

    @classmethod
    def from_config(cls, cfg: PPOConfig, inputs: SourceInputs) -> "PPOOffPolicySource":
        """``offpolicy=ppo``: k = ``offpolicy.batches_per_version``, in this process."""
        return cls(inputs.sampler, inputs.batch.prompts, cfg.batches_per_version, inputs.model)

    def next_batch(self, version: int) -> List[ScoredGroup]:
        start = time.monotonic()
        self.since = start if self.since is None else self.since
        if self.left == 0:
            self.block_version, self.left = version, self.k
            if self.kept is not None:
                self.kept.keep()
        stale = self.kept is not None and version != self.block_version
        with self.kept.swapped_in() if stale else nullcontext():
            groups = self.sampler.sample_batch(self.prompts, self.block_version)
        self.left -= 1
        self.generate_s += time.monotonic() - start
        return groups

    def after_update(self, model, version: int) -> None:
        """The generator shares the learner's model: nothing to publish."""

    def state_dict(self) -> dict:
        mid_block = self.kept is not None and self.left > 0
        return {"block_version": self.block_version, "left": self.left,
                "kept": self.kept.state_dict() if mid_block else None}

    def load_state_dict(self, state: dict) -> None:
        if "left" not in state:
            raise ValueError("checkpoint: PPO-off-policy state from an earlier rlscale (batches generated ahead); "
                             "start the run again in a new folder")
        self.block_version, self.left = state["block_version"], state["left"]
        if self.kept is not None:
            self.kept.load_state_dict(state["kept"])

    def close(self) -> None:
        pass

    def metrics(self) -> dict:
        """Generation and updates alternate in one process: the trainer waits while the batches are
        generated, the generator idles while the trainer updates."""
        now = time.monotonic()
        wall = now - self.since
        record = {"trainer_wait_s": self.generate_s,
                  "generator_idle_frac": max(0.0, 1.0 - self.generate_s / wall) if wall > 0 else 0.0}
        self.generate_s, self.since = 0.0, now
        return record
