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
"""
from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from typing import Callable, Iterator, List, Tuple

import torch

POLL_S = 0.5


def paired_tensors(dst: torch.nn.Module, src: torch.nn.Module) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """(destination, source) tensors of two copies of the same architecture, by state-dict key."""
    d, s = dst.state_dict(), src.state_dict()
    if d.keys() != s.keys():
        raise ValueError("the models to copy between have different parameters")
    return [(d[name], s[name]) for name in d]


@torch.no_grad()
def copy_weights(pairs: List[Tuple[torch.Tensor, torch.Tensor]]) -> None:
    for dst, src in pairs:
        dst.copy_(src)
    for device in {t.device for pair in pairs for t in pair if t.is_cuda}:
        torch.cuda.synchronize(device)


class SharedWeights:
    """The published policy: a shared-memory copy of the model and its version (-1 before the first
    publication). Made by the trainer, handed to generator processes at start."""

    def __init__(self, model: torch.nn.Module, ctx):
        self.model = copy.deepcopy(model).eval().share_memory()
        self.version = ctx.RawValue("q", -1)
        self.lock = ctx.Lock()

    @contextmanager
    def locked(self, check: Callable[[], None]) -> Iterator[None]:
        while not self.lock.acquire(timeout=POLL_S):
            check()
        try:
            yield
        finally:
            self.lock.release()

    def publish(self, model: torch.nn.Module, version: int, check: Callable[[], None]) -> float:
        """Copy ``model``'s weights in as ``version``; returns the seconds it took (lock wait included)."""
        start = time.perf_counter()
        with self.locked(check):
            copy_weights(paired_tensors(self.model, model))
            self.version.value = version
        return time.perf_counter() - start


class PolicyReplica:
    """A generator's private copy of the published policy (on its own device), refreshed in place."""

    def __init__(self, shared: SharedWeights, device: torch.device):
        self.shared = shared
        self.model = copy.deepcopy(shared.model).to(device).eval()
        self.pairs = paired_tensors(self.model, shared.model)
        self.version = -1
        self.load_seconds = 0.0

    def refresh(self, check: Callable[[], None]) -> int:
        """Load the published weights if their version changed; returns the version now held."""
        if self.shared.version.value != self.version:
            start = time.perf_counter()
            with self.shared.locked(check):
                copy_weights(self.pairs)
                self.version = self.shared.version.value
            self.load_seconds += time.perf_counter() - start
        return self.version
