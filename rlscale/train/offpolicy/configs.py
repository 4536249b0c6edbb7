"""The config class of each off-policy mode (Section 3.1), the annotation of its source's ``from_config``'s ``cfg``:
``PPOConfig`` (``ppo.PPOOffPolicySource``), ``PipelineConfig`` (``pipeline.PipelineSource``). The run's ``offpolicy``
section is typed by the one its ``name`` picks when the config is composed (``rlscale.config.compose``), so a knob of
the other mode is refused there. They live apart from the sources, in a module that imports no torch, so composing a
config imports neither source (``rlscale.config.registry.OFFPOLICY`` names them)."""
from __future__ import annotations

from dataclasses import dataclass

from rlscale.knobs import knob

OFFPOLICY_NAME = "the off-policy algorithm (``offpolicy=NAME``)"


@dataclass
class OffpolicyConfig:
    """How generation and training interleave (Sec. 3.1). Each mode has its own k: PPO-off-policy-k's k is a batch
    count, PipelineRL-k's a bound on staleness."""

    name: str = knob("pipeline", OFFPOLICY_NAME, "Sec. 3.1")


@dataclass
class PPOConfig(OffpolicyConfig):
    """PPO-off-policy-k's k (Sec. 3.1)."""

    name: str = knob("ppo", OFFPOLICY_NAME, "Sec. 3.1")
    batches_per_version: int = knob(2, "PPO-off-policy-k's k, the batches generated with one policy version before k "
                                    "updates of one batch each, so a batch is 0..k-1 versions stale (0 or 1: "
                                    "on-policy). Paper: 8 (4 and 8 equal); scaled down for the embedded default's "
                                    "short runs", "Sec. 3.1", ge=0)


@dataclass
class PipelineConfig(OffpolicyConfig):
    """PipelineRL-k's bound on staleness, its generator processes and their in-flight updates (Sec. 3.1)."""

    name: str = knob("pipeline", OFFPOLICY_NAME, "Sec. 3.1")
    max_lag: int = knob(2, "PipelineRL-k's k, the most versions a trained token's sampling policy may lag the "
                        "trainer: generators wait when k + 1 batches ahead (0: on-policy). Paper: 8; scaled down for "
                        "the embedded default's short runs (at 8 a 60-step tiny run dips below R0 first)",
                        "Sec. 3.1", ge=0)
    num_generators: int = knob(1, "generator processes beside the trainer (on GPU machines on the GPUs after the "
                               "trainer's)", gt=0)
    queue_size: int = knob(4, "finished chunks waiting for the trainer at most; a full queue stalls the generators",
                           gt=0)
    update_every_tokens: int = knob(16, "0 = a generator takes new weights at its next decode step after they are "
                                    "published, the paper's \"as soon as an update finishes\" (which version samples "
                                    "which token then depends on timing); N > 0 = scheduled in-flight updates: a "
                                    "chunk issued at version v samples decode step s with version v + s // N, so one "
                                    "seed gives one curve, a resumed run included. On GPUs pass 0 or about the decode "
                                    "steps a generator makes during one update", "Sec. 3.1", ge=0)

    @property
    def slots(self) -> int:
        """The versions the published policy keeps: the last k + 1 with scheduled updates, else the newest."""
        return self.max_lag + 1 if self.update_every_tokens > 0 else 1
