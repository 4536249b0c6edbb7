"""Weight publication for PipelineRL-k (Section 3.1): "new weights are pushed to the generators as soon
as an update finishes". On one machine this is a copy of the policy in shared memory plus the version
it holds: the trainer copies its weights in after every optimizer step and bumps the version; each
generator compares the version between decode steps and, when it changed, copies the new weights into
its own replica and continues the sequences in flight with them (their KV cache stays as it is).

CPU policies live in /dev/shm (``Module.share_memory``); a CUDA policy stays on the trainer's device
and reaches generator processes through CUDA IPC, so a publication is one device copy and a pull one
peer copy. Both sides hold one inter-process lock while copying, so a generator never reads half-written
weights. Lock waits poll ``check`` (the peer-liveness test) so a dead peer fails the caller instead of
hanging it.

Scheduled updates (``offpolicy.update_every_tokens`` = N > 0): the published policy keeps the last k + 1
versions, one slot each (version v in slot v mod (k + 1)), and a generator loads the version its chunk's
schedule names rather than the newest one (``ScheduledVersions``). While a chunk is in flight the
trainer's version is at most k past the version the chunk was issued at (the bound of
``rlscale.train.offpolicy.pipeline``), so the slots never lose a version a generator still needs.
"""
from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import torch

POLL_S = 0.5
WAIT_S = 0.0005  # scheduled updates: first poll interval while waiting for a version, doubled per poll
WAIT_MAX_S = 0.01  # ... up to this: a generator waiting through an update or an eval costs little CPU


Weights = Dict[str, torch.Tensor]  # a state dict


def paired_tensors(dst: Weights, src: Weights) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """(destination, source) tensors of two state dicts of the same architecture, by key."""
    if dst.keys() != src.keys():
        raise ValueError("the models to copy between have different parameters")
    return [(dst[name], src[name]) for name in dst]


@torch.no_grad()
def copy_weights(pairs: List[Tuple[torch.Tensor, torch.Tensor]]) -> None:
    for dst, src in pairs:
        dst.copy_(src)
    for device in {t.device for pair in pairs for t in pair if t.is_cuda}:
        torch.cuda.synchronize(device)


class SharedWeights:
    """The published policy: ``slots`` shared-memory copies of the model holding the newest versions
    (version v in slot v mod slots), the newest version (-1 before the first publication) and the
    trainer's need (``need``). Made by the trainer, handed to generator processes at start."""

    def __init__(self, model: torch.nn.Module, ctx, slots: int = 1):
        self.models = [copy.deepcopy(model).eval().share_memory() for _ in range(slots)]
        self.held = ctx.RawArray("q", [-1] * slots)  # the version in each slot
        self.version = ctx.RawValue("q", -1)
        self.lock = ctx.Lock()
        self.need_state = ctx.RawArray("q", [-1, 0])  # (trainer version, stream positions it needs), under lock

    @contextmanager
    def locked(self, check: Callable[[], None]) -> Iterator[None]:
        while not self.lock.acquire(timeout=POLL_S):
            check()
        try:
            yield
        finally:
            self.lock.release()

    def publish(self, weights: Weights, version: int, check: Callable[[], None]) -> float:
        """Copy ``weights`` (a state dict of the model) in as ``version``; returns the seconds it took (lock
        wait included)."""
        start = time.perf_counter()
        slot = version % len(self.models)
        with self.locked(check):
            copy_weights(paired_tensors(self.models[slot].state_dict(), weights))
            self.held[slot] = version
            self.version.value = version
        return time.perf_counter() - start

    def slot_of(self, version: int) -> int:
        """The slot holding published ``version``; raises if a newer version overwrote it."""
        slot = version % len(self.models)
        if self.held[slot] != version:
            raise RuntimeError(f"policy version {version} is no longer published (slot {slot} holds "
                               f"{self.held[slot]})")
        return slot

    def weights(self, version: int) -> Weights:
        """A CPU copy of published ``version`` (for checkpoints)."""
        published = self.models[self.slot_of(version)].state_dict()
        return {name: t.detach().to("cpu", copy=True) for name, t in published.items()}

    def set_need(self, version: int, upto: int, check: Callable[[], None]) -> None:
        """The trainer, at ``version``, needs the groups at stream positions < ``upto`` for its step."""
        with self.locked(check):
            self.need_state[0], self.need_state[1] = version, upto

    def need(self, check: Callable[[], None]) -> Tuple[int, int]:
        with self.locked(check):
            return self.need_state[0], self.need_state[1]


class PolicyReplica:
    """A generator's private copy of the published policy (on its own device), refreshed in place."""

    def __init__(self, shared: SharedWeights, device: torch.device):
        self.shared = shared
        self.model = copy.deepcopy(shared.models[0]).to(device).eval()
        self.pairs = [paired_tensors(self.model.state_dict(), slot.state_dict()) for slot in shared.models]
        self.version = -1
        self.load_seconds = 0.0

    def published(self) -> int:
        """The newest version published (-1 before the first)."""
        return self.shared.version.value

    def need(self, check: Callable[[], None]) -> Tuple[int, int]:
        """The trainer's version and the stream positions its step needs (``SharedWeights.need``)."""
        return self.shared.need(check)

    def refresh(self, check: Callable[[], None]) -> int:
        """Load the newest published weights if their version changed; returns the version now held."""
        return self.version if self.shared.version.value == self.version else self._copy_in(None, check)

    def load(self, version: int, check: Callable[[], None]) -> int:
        """Load published ``version`` (no-op if held); raises if its slot was overwritten by a newer one."""
        return version if version == self.version else self._copy_in(version, check)

    def _copy_in(self, version: Optional[int], check: Callable[[], None]) -> int:
        """Copy ``version`` (None: the newest, read under the lock) into the replica."""
        start = time.perf_counter()
        with self.shared.locked(check):
            version = self.shared.version.value if version is None else version
            copy_weights(self.pairs[self.shared.slot_of(version)])
            self.version = version
        self.load_seconds += time.perf_counter() - start
        return version


class NewestVersions:
    """Immediate in-flight updates (the paper's, ``offpolicy.update_every_tokens`` = 0): the prefill and
    every decode step use the newest published version."""

    waited = 0.0  # never waits

    def __init__(self, replica: PolicyReplica, check: Callable[[], None]):
        self.replica, self.check = replica, check

    def prefill(self) -> int:
        return self.replica.refresh(self.check)

    def __call__(self) -> int:
        """The version of the next decode step, loaded."""
        self.check()
        return self.replica.refresh(self.check)


class ScheduledVersions:
    """Deterministic in-flight updates of one chunk (``offpolicy.update_every_tokens`` = ``every``):
    decode step s samples with version ``issued + s // every``, the chunk's issue version plus one per
    ``every`` tokens, waiting for it to be published; but never past the trainer's version at the step
    that consumes the chunk, since that step publishes nothing until the chunk arrives. That version is
    known once the trainer needs the chunk (``PolicyReplica.need``). Either way the version depends only
    on the stream, not on timing, so one seed gives one curve."""

    def __init__(self, replica: PolicyReplica, issued: int, position: int, every: int, check: Callable[[], None]):
        self.replica, self.issued, self.position, self.every, self.check = replica, issued, position, every, check
        self.step = 0
        self.waited = 0.0  # seconds spent waiting for versions

    def prefill(self) -> int:
        return self.replica.load(self.issued, self.check)

    def __call__(self) -> int:
        """The version of the next decode step, loaded."""
        self.check()
        wanted = self.issued + self.step // self.every
        self.step += 1
        start = polled = time.monotonic()
        wait = WAIT_S
        while self.replica.published() < wanted:
            version, upto = self.replica.need(self.check)
            if self.position < upto and version < wanted:
                wanted = version
                break
            time.sleep(wait)
            wait = min(2 * wait, WAIT_MAX_S)
            if time.monotonic() - polled > POLL_S:
                self.check()
                polled = time.monotonic()
        self.waited += time.monotonic() - start
        return self.replica.load(wanted, self.check)
