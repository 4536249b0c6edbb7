"""PipelineRL-k (Section 3.1; the ScaleRL default, k = 8): generators and the trainer run concurrently
in separate processes. Generators stream finished groups to the trainer; after every optimizer step the
trainer publishes its weights and the generators continue the sequences in flight with them (stale KV
cache, no restart). Every token records the policy version that sampled it and its generator logprob.

The training prompts form one stream of groups, drawn from the No-Positive-Resampling pool by the
trainer (so the pool lives and is checkpointed in one place), sent to the generators in chunks of
ceil(B / num_generators) prompts, scored by the trainer in stream order, and consumed B =
``batch.prompts`` groups per step (more with DAPO dynamic sampling). Finished chunks come back through a
queue bounded at ``offpolicy.queue_size`` chunks that the trainer reads only while it needs groups, so a
full queue stalls the generators too.

The bound. Let C_v be the number of groups consumed before step v. Right after publishing version v the
trainer lets the stream run to C_v + (k + 1) B groups; a group the current step still needs beyond that
is issued on demand. A group issued at version v is sampled by versions >= v (generators load the
newest weights before the prefill) and, since every step consumes at least B groups, is trained at a
step <= v + k. Hence the lag (trainer version minus sampling version) of every trained token is in
[0, k]: generators wait when they are k + 1 batches ahead, the trainer waits for the groups it needs.
k = 0 is on-policy: batch v is issued only once version v is published and is trained by step v.

Determinism: chunk sampling seeds depend only on the stream position, and chunks are scored only when a
step needs them, in stream order. Which version samples which token depends on timing unless
``offpolicy.update_every_tokens`` schedules the in-flight updates (``ScheduledVersions``): the trainer
tells the generators which versions and stream positions its current step needs (``GeneratorPool.need``)
and the generators follow the schedule, so one seed gives one curve.
Resume: the checkpoint holds the scored groups not yet trained on and the chunks in flight (stream
position, prompt ids, issue version); generation in flight is dropped and those chunks are generated again
after the restart, at the same positions. With scheduled updates it also holds the weights of the older
versions still published (at most k), which are published again before the chunks are, so a resumed run
repeats the uninterrupted one.
Compute: generator CPU seconds are added to the run's core-seconds when their chunk is scored (on CUDA
the meter counts wall time x devices, less compilation: the part of the trainer's wait for a chunk that
its generator spent compiling counts as a compilation stall, ``rlscale.engines.compile_cost``); work
dropped at a resume or at the end is not counted.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Deque, Dict, List, Optional, Tuple

import torch

from rlscale.config.schema import BatchConfig
from rlscale.core.seeds import derived_seed
from rlscale.engines.compile_cost import STALLS
from rlscale.engines.generators.build import GeneratorSettings
from rlscale.rl import PoolExhausted
from rlscale.train.batch import ScoredGroup
from rlscale.train.checkpoint import CHECKPOINT
from rlscale.train.offpolicy.pipeline_remote import RemoteGeneratorPool
from rlscale.train.offpolicy.pipeline_weights import POLL_S, Weights
from rlscale.train.offpolicy.pipeline_workers import ChunkRequest, ChunkResult, GeneratorPool, GeneratorSpec, generator_devices
from rlscale.train.offpolicy.configs import PipelineConfig
from rlscale.train.offpolicy.source import SourceInputs
from rlscale.train.rollouts import RolloutSampler

CHUNK_SEED_BASE = 104_729_000_000



@dataclass
class IssuedChunk:
    """Prompts sent to the generators as one chunk, and the policy version published when they were."""

    ids: List[int]
    version: int


@dataclass
class StepCounters:
    """What one step of the trainer saw (reset by ``metrics``)."""

    trainer_wait_s: float = 0.0
    weight_sync_s: float = 0.0
    queue_depth: int = 0


def split_cpu_threads(device: torch.device, generators: int) -> int:
    """On CPU the trainer and its generators share this process's thread budget (``engine.threads``,
    or the sweep lane's cap, or torch's default): each of the 1 + ``generators`` processes gets an equal
    share, at least one thread, and the trainer takes its share now. Oversubscribed OpenMP pools spin
    against each other (5x slower on 2 cores). On CUDA nothing changes (0 = leave as is)."""
    if device.type != "cpu":
        return 0
    share = max(1, torch.get_num_threads() // (1 + generators))
    torch.set_num_threads(share)
    return share


class PipelineSource:
    """PipelineRL-k as a ``RolloutSource`` (see the module docstring for the protocol and its bound)."""

    def __init__(self, off: PipelineConfig, generator: GeneratorSettings, batch: BatchConfig, sampler: RolloutSampler,
                 model: torch.nn.Module, run_dir: Path, generator_tasks: int = 0):
        if off.num_generators < 1 or off.queue_size < 1:
            raise ValueError(f"offpolicy.num_generators and offpolicy.queue_size must be >= 1, got "
                             f"{off.num_generators} and {off.queue_size}")
        self.sampler = sampler
        self.model = model
        self.prompts = batch.prompts
        self.k = off.max_lag
        self.scheduled = off.update_every_tokens > 0
        self.chunk = math.ceil(self.prompts / off.num_generators)
        self.seed = generator.seed
        device = next(model.parameters()).device
        if generator_tasks:  # the job's generator tasks (rlscale.train.offpolicy.pipeline_remote)
            self.workers = RemoteGeneratorPool(generator_tasks, model, off.slots, off.queue_size)
        else:
            spec = GeneratorSpec(generator, off.update_every_tokens, tok=sampler.tok, generations=batch.generations,
                                 threads=split_cpu_threads(device, off.num_generators))
            self.workers = GeneratorPool(spec, generator_devices(device, off.num_generators), model, off.slots,
                                         off.queue_size, run_dir)
        self.consumed = 0                      # groups handed to the trainer
        self.issued = 0                        # groups sent to the generators (stream positions < issued)
        self.ready: Deque[ScoredGroup] = deque()          # scored, in stream order, not yet consumed
        self.in_flight: Dict[int, IssuedChunk] = OrderedDict()  # chunk position -> chunk, unscored
        self.arrived: Dict[int, ChunkResult] = {}         # finished chunks waiting for their turn
        self.resumed_versions: List[Tuple[int, Weights]] = []  # older versions to publish again
        self.exhausted = False
        self.published: Optional[int] = None
        self.counters = StepCounters()
        self.mark: Optional[tuple[float, float, float]] = None  # (time, busy s, load s) at the last metrics

    @classmethod
    def from_config(cls, cfg: PipelineConfig, inputs: SourceInputs) -> "PipelineSource":
        """``offpolicy=pipeline``: generator processes with the run's generator settings, or the job's generator
        tasks (``launcher.generator_tasks``)."""
        return cls(cfg, inputs.generator, inputs.batch, inputs.sampler, inputs.model, inputs.run_dir,
                   inputs.generator_tasks)

    # -- the stream ----------------------------------------------------------------------------
    def _issue(self, upto: int) -> None:
        """Send chunks until ``upto`` groups have been issued (or the pool is exhausted)."""
        while self.issued < upto and not self.exhausted:
            try:
                ids = self.sampler.pool.next_batch(min(self.chunk, upto - self.issued), self.sampler.rng)
            except PoolExhausted:
                self.exhausted = True
                return
            self.in_flight[self.issued] = IssuedChunk(ids, self.published)
            self._submit(self.issued)
            self.issued += len(ids)

    def _submit(self, position: int) -> None:
        chunk = self.in_flight[position]
        seed = derived_seed(CHUNK_SEED_BASE, self.seed, position)
        self.workers.submit(ChunkRequest(position, self.sampler.encode(chunk.ids), seed, chunk.version))

    def _receive(self) -> None:
        """Take one finished chunk off the queue, waiting up to a poll interval for it."""
        start = time.monotonic()
        result = self.workers.receive(POLL_S)
        self.counters.trainer_wait_s += time.monotonic() - start
        if result is not None:
            self.arrived[result.position] = result

    def _score_next(self) -> None:
        """Score the oldest chunk in flight, receiving until it has arrived. Chunks are scored only when a
        step needs them, in stream order, so the pool's pass rates and the generation compute at every
        issue depend on the stream alone, not on when chunks happened to arrive."""
        position = next(iter(self.in_flight))
        start = time.monotonic()
        while position not in self.arrived:
            self._receive()
        ids = self.in_flight.pop(position).ids
        result = self.arrived.pop(position)
        STALLS.add(min(time.monotonic() - start, result.compile_seconds))
        self.ready.extend(self.sampler.score(ids, result.completions))
        meter = self.sampler.meter
        if meter.device_type == "cpu":
            meter.totals.device_seconds += result.cpu_seconds

    def _take(self, n: int) -> List[ScoredGroup]:
        """The next ``n`` groups of the stream, waiting for them (issued now if not in flight yet)."""
        in_flight = self.issued - self.consumed - len(self.ready)
        self._issue(self.issued + max(0, n - len(self.ready) - in_flight))
        self.workers.need(self.published, self.consumed + n)
        while len(self.ready) < n:
            if not self.in_flight:
                raise PoolExhausted("No-Positive-Resampling removed every training prompt")
            self._score_next()
        self.consumed += n
        return [self.ready.popleft() for _ in range(n)]

    # -- RolloutSource -------------------------------------------------------------------------
    def next_batch(self, version: int) -> List[ScoredGroup]:
        if self.published is None:  # a fresh run: publish the initial weights as ``version``
            self.after_update(self.model, version)
        self.counters.queue_depth = self.workers.waiting()
        return self.sampler.fill_batch(self.prompts, self._take)

    def after_update(self, model, version: int) -> None:
        """Publish the new weights, then let the stream run k + 1 batches past what was consumed. The first
        call after a resume publishes the checkpoint's older versions first and resubmits its chunks."""
        for old, weights in self.resumed_versions:
            self.workers.publish(weights, old)
        self.resumed_versions = []
        self.counters.weight_sync_s += self.workers.publish(model.state_dict(), version)
        if self.published is None:
            self.mark = (time.monotonic(), self.workers.status.busy_seconds(), self.workers.status.load_seconds())
            for position in self.in_flight:  # the chunks of the checkpoint we resumed from
                self._submit(position)
        self.published = version
        self._issue(self.consumed + (self.k + 1) * self.prompts)

    def state_dict(self) -> dict:
        """Called right after ``after_update``. With scheduled updates the chunks in flight may still need
        every version from the oldest one they were issued at, so those are saved too."""
        older = (range(min(c.version for c in self.in_flight.values()), self.published)
                 if self.scheduled and self.in_flight else range(0))
        return {"consumed": self.consumed, "ready": list(self.ready),
                "in_flight": [(position, c.ids, c.version) for position, c in self.in_flight.items()],
                "versions": [(v, self.workers.published_weights(v)) for v in older]}

    def load_state_dict(self, state: dict) -> None:
        if self.published is not None:
            raise RuntimeError("PipelineSource.load_state_dict must come before the first batch")
        if "versions" not in state:
            raise ValueError(f"{CHECKPOINT}: its PipelineRL state has no chunk positions (an older rlscale wrote "
                             "it); resume it with that rlscale, or start the run again in a new directory")
        self.consumed = state["consumed"]
        self.ready = deque(state["ready"])
        self.in_flight = OrderedDict((position, IssuedChunk(ids, version))
                                     for position, ids, version in state["in_flight"])
        self.issued = self.consumed + len(self.ready) + sum(len(c.ids) for c in self.in_flight.values())
        self.resumed_versions = state["versions"]

    def metrics(self) -> Dict[str, float]:
        """generator_idle_frac (share of generator time not spent generating since the last call),
        trainer_wait_s (blocked waiting for groups), weight_sync_s (publication, trainer side),
        weight_load_s (loads, all generators), queue_depth (finished chunks not yet taken off the
        queue when the step asked for its batch)."""
        now, busy, load = time.monotonic(), self.workers.status.busy_seconds(), self.workers.status.load_seconds()
        then, busy0, load0 = self.mark or (now, busy, load)
        wall = (now - then) * self.workers.size
        record = {"generator_idle_frac": min(1.0, max(0.0, 1.0 - (busy - busy0) / wall)) if wall > 0 else 0.0,
                  "trainer_wait_s": self.counters.trainer_wait_s, "weight_sync_s": self.counters.weight_sync_s,
                  "weight_load_s": load - load0, "queue_depth": float(self.counters.queue_depth)}
        self.mark, self.counters = (now, busy, load), StepCounters()
        return record

    def close(self) -> None:
        self.workers.close()
