"""PipelineRL's generators as tasks of the run's job (``launcher.generator_tasks``; Section 3.1 splits the
paper's GPUs between trainer and generator nodes): the job's last tasks each run one generator, on any node,
and reach trainer rank 0 over the network instead of shared memory.

Rank 0 hosts a TCP key-value store at ``MASTER_ADDR``:``MASTER_PORT + 2`` (``+ 1`` is the job channel,
rlscale.sweep.job) through which everything but the weights travels:

- requests: rank 0 writes ``request/<i>``; each generator claims the next index (``claimed``) and waits for it;
- results: a generator reserves the next result index (``reserved``), waits while ``offpolicy.queue_size``
  results are ahead of what rank 0 took (``taken``), the bound of the local queue, then writes ``result/<j>``;
- the trainer's need (``need``, scheduled updates), each generator's counters (``status/<g>``), a heartbeat
  counter a thread of each generator bumps every second (``beat/<g>``), a generator's last error
  (``failed/<g>``), and the end of the run (``closed``).

Weight publication: the weights are broadcast from rank 0 over a process group of its own (rank 0 and the
generators; NCCL on CUDA, Gloo on CPU), in buckets of ``BUCKET_BYTES``, each tensor once (tied weights travel
once: rank 0's model decides which keys travel, ``distinct_keys``). Rank 0 announces each publication
(``publication/<n>`` = its version, then the ``publications`` counter) and broadcasts; a generator joins every
publication in order whenever it looks for a version (between decode steps, and wherever it waits), so a
publication waits at most one decode step of the slowest generator. Each generator keeps the last k + 1
versions (one with immediate updates) on its device, as the shared-memory slots do on one machine, so
scheduled in-flight updates (``ScheduledVersions``) give the same curve as generators beside the trainer.
A ZeRO-3 learner's ``state_dict()`` is the gathered full model, the one thing rank 0 publishes.

Failure handling, never a hang: a generator that raises writes ``failed/<g>`` and its traceback to
``generator-task-<g>.log`` in the run folder; one whose heartbeat stops for ``HEARTBEAT_TIMEOUT_S`` is
declared gone (``SILENCE_S`` once a publication to it failed); rank 0 raises ``RuntimeError`` naming it
wherever it waits. A generator whose rank 0 is gone
loses the store and exits.
"""
from __future__ import annotations

import json
import os
import pickle
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from rlscale.train.offpolicy.pipeline_weights import WAIT_MAX_S, WAIT_S, Weights, copy_weights
from rlscale.train.offpolicy.pipeline_workers import ChunkRequest, ChunkResult, GeneratorSpec, generate_chunk

STORE_PORT_OFFSET = 2  # MASTER_PORT + 1 is the job channel's store
CONNECT_TIMEOUT = timedelta(minutes=10)  # for every generator task to join, and for one publication
HEARTBEAT_S = 1.0
HEARTBEAT_TIMEOUT_S = 30.0  # a thread beats, whatever the main thread does: only a dead process stops it
SILENCE_S = 3.0  # after a failed publication: a generator task whose heartbeat stands still this long is gone
BUCKET_BYTES = 256 << 20  # weights broadcast per collective at most


class GeneratorsClosed(Exception):
    """Rank 0 closed the pool: the run is over for this generator task."""


@dataclass(frozen=True)
class StoreAddress:
    """Where rank 0's store for the generator tasks listens."""

    host: str
    port: int

    @classmethod
    def of_environment(cls) -> "StoreAddress":
        """From torch's env:// variables (exported for every task of the job, rlscale.train.ranks)."""
        return cls(os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   int(os.environ.get("MASTER_PORT", "29500")) + STORE_PORT_OFFSET)

    def connect(self, leader: bool) -> dist.TCPStore:
        return dist.TCPStore(self.host, self.port, None, leader, timeout=CONNECT_TIMEOUT, wait_for_workers=False)


def weight_group(store: dist.Store, rank: int, size: int, device: torch.device):
    """The process group that carries the weights: rank 0 is the trainer, 1.. the generator tasks."""
    prefixed = dist.PrefixStore("weights", store)
    if device.type == "cuda":
        return dist.ProcessGroupNCCL(prefixed, rank, size)
    return dist.ProcessGroupGloo(prefixed, rank, size, CONNECT_TIMEOUT)


def distinct_keys(weights: Weights) -> List[str]:
    """The state dict's keys less those of tensors an earlier key holds (tied weights: an embedding and its
    LM head travel once)."""
    seen, keys = set(), []
    for key, tensor in weights.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            keys.append(key)
    return keys


def buckets(tensors: List[torch.Tensor]) -> List[List[torch.Tensor]]:
    """Consecutive tensors of one dtype and device, at most ``BUCKET_BYTES`` a bucket (or one larger tensor)."""
    out: List[List[torch.Tensor]] = []
    size = 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if not out or size + nbytes > BUCKET_BYTES or (out[-1][0].dtype, out[-1][0].device) != (tensor.dtype,
                                                                                                  tensor.device):
            out.append([])
            size = 0
        out[-1].append(tensor)
        size += nbytes
    return out


def broadcast_weights(group, tensors: List[torch.Tensor], receive: bool) -> None:
    """Broadcast ``tensors`` from rank 0 of ``group``, a flat buffer per bucket; a receiver (``receive``) copies
    what arrives into its ``tensors``."""
    for bucket in buckets(tensors):
        flat = torch.cat([t.detach().reshape(-1) for t in bucket])
        group.broadcast(flat, 0).wait()
        if flat.is_cuda:  # the publication's time is the transfer's, not its launch's
            torch.cuda.synchronize(flat.device)
        if not receive:
            continue
        offset = 0
        with torch.no_grad():
            for t in bucket:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()


class RemoteStatus:
    """The generators' counters as rank 0 reads them (``GeneratorStatus``'s readings): busy and weight-load
    seconds of finished chunks, chunks finished."""

    def __init__(self, store: dist.TCPStore, count: int):
        self.store, self.count = store, count

    def _totals(self) -> List[Dict[str, float]]:
        keys = [f"status/{g}" for g in range(self.count)]
        return [json.loads(self.store.get(key)) if self.store.check([key]) else {} for key in keys]

    def busy_seconds(self) -> float:
        return sum(t.get("busy", 0.0) for t in self._totals())

    def load_seconds(self) -> float:
        return sum(t.get("load", 0.0) for t in self._totals())

    def chunks_finished(self) -> int:
        return int(self.store.add("posted", 0))


class RemoteGeneratorPool:
    """Rank 0's handle on the generator tasks (``GeneratorPool``'s interface): publish weights, submit chunks,
    receive finished ones, watch liveness, close."""

    def __init__(self, count: int, model: torch.nn.Module, slots: int, queue_size: int,
                 address: Optional[StoreAddress] = None):
        self.count = count
        self.store = (address or StoreAddress.of_environment()).connect(leader=True)
        self.keys = distinct_keys(model.state_dict())  # what each publication carries, in this order
        self.store.set("queue_size", str(queue_size))
        self.store.set("slots", str(slots))
        self.store.set("keys", json.dumps(self.keys))
        self.status = RemoteStatus(self.store, count)
        self.device = next(model.parameters()).device
        self.beats: Dict[int, Tuple[int, float]] = {}
        self.published_copies: Dict[int, Weights] = {}
        self.slots = slots
        self.publications = 0
        self.submitted = 0
        self.received = 0
        self.group = weight_group(self.store, 0, count + 1, self.device)  # waits for every generator task

    @property
    def size(self) -> int:
        return self.count

    def check(self) -> None:
        """Raise RuntimeError naming the first generator task that failed or stopped beating."""
        now = time.monotonic()
        for g in range(self.count):
            if self.store.check([f"failed/{g}"]):
                raise RuntimeError(f"generator task {g} failed: {self.store.get(f'failed/{g}').decode()}")
            beat = int(self.store.add(f"beat/{g}", 0))
            seen, since = self.beats.get(g, (-1, now))
            if beat != seen:
                self.beats[g] = (beat, now)
            elif now - since > HEARTBEAT_TIMEOUT_S:
                raise RuntimeError(f"generator task {g} is gone: no heartbeat for {now - since:.0f} s")

    def silent(self, seconds: float) -> List[int]:
        """The generator tasks whose heartbeat does not move within ``seconds``."""
        before = [int(self.store.add(f"beat/{g}", 0)) for g in range(self.count)]
        time.sleep(seconds)
        return [g for g in range(self.count) if int(self.store.add(f"beat/{g}", 0)) == before[g]]

    def waiting(self) -> int:
        return self.status.chunks_finished() - self.received

    def publish(self, weights: Weights, version: int) -> float:
        """Broadcast ``weights`` as ``version`` to every generator task; returns the seconds it took."""
        start = time.perf_counter()
        self.check()
        self.store.set(f"publication/{self.publications}", str(version))
        self.publications = int(self.store.add("publications", 1))
        try:
            broadcast_weights(self.group, [weights[key] for key in self.keys], receive=False)
        except RuntimeError as err:
            self.check()
            cause = " ".join(str(err).split())
            cause = cause.split("] ", 1)[-1].split(". ", 1)[0][:200]  # gloo's message less its source line
            silent = self.silent(SILENCE_S)
            who = (f"generator task {', '.join(map(str, silent))} is gone (no heartbeat for {SILENCE_S:.0f} s)"
                   if silent else "the generator tasks beat")
            raise RuntimeError(f"weight publication {version} failed ({cause}): {who}") from None
        if self.slots > 1:  # scheduled updates: a checkpoint saves the older versions still in use
            self.published_copies[version] = {k: t.detach().to("cpu", copy=True) for k, t in weights.items()}
            self.published_copies.pop(version - self.slots, None)
        return time.perf_counter() - start

    def published_weights(self, version: int) -> Weights:
        if version not in self.published_copies:
            raise RuntimeError(f"policy version {version} is no longer published")
        return self.published_copies[version]

    def need(self, version: int, upto: int) -> None:
        self.store.set("need", f"{version},{upto}")

    def submit(self, request: ChunkRequest) -> None:
        self.store.set(f"request/{self.submitted}", pickle.dumps(request))
        self.submitted += 1

    def receive(self, timeout: float) -> Optional[ChunkResult]:
        """The next finished chunk, or None when none arrives within ``timeout`` seconds."""
        key = f"result/{self.received}"
        deadline = time.monotonic() + timeout
        wait = WAIT_S
        self.check()
        while not self.store.check([key]):
            if time.monotonic() > deadline:
                return None
            time.sleep(wait)
            wait = min(2 * wait, WAIT_MAX_S)
        result: ChunkResult = pickle.loads(self.store.get(key))
        self.store.delete_key(key)
        self.received += 1
        self.store.add("taken", 1)
        return result

    def close(self) -> None:
        """Tell the generator tasks the run is over (they go back to their job), then stop the store."""
        self.store.set("closed", "1")
        deadline = time.monotonic() + 10.0
        while self.store.add("left", 0) < self.count and time.monotonic() < deadline:
            time.sleep(0.05)
        self.group = self.store = self.status = None  # the store's server stops with its last reference


class RemoteReplica:
    """A generator task's policy (``PolicyReplica``'s interface): it joins every publication in order, keeping
    the last ``slots`` versions on its device, and loads the one a decode step wants."""

    def __init__(self, model: torch.nn.Module, store: dist.TCPStore, group, slots: int):
        self.model = model
        self.store, self.group = store, group
        state = model.state_dict()
        keys = json.loads(store.get("keys"))  # rank 0's distinct keys: its ties decide what travels
        self.copies = [{key: state[key].detach().clone() for key in keys} for _ in range(slots)]
        self.pairs = [[(state[key], copy[key]) for key in keys] for copy in self.copies]
        self.held = [-1] * slots
        self.joined = 0  # publications received
        self.newest = -1
        self.version = -1
        self.load_seconds = 0.0

    def sync(self) -> None:
        """Receive every publication announced since the last call."""
        announced = int(self.store.add("publications", 0))
        while self.joined < announced:
            start = time.perf_counter()
            version = int(self.store.get(f"publication/{self.joined}"))
            slot = version % len(self.copies)
            broadcast_weights(self.group, list(self.copies[slot].values()), receive=True)
            self.held[slot], self.newest = version, version
            self.joined += 1
            self.load_seconds += time.perf_counter() - start

    def published(self) -> int:
        self.sync()
        return self.newest

    def need(self, check: Callable[[], None]) -> Tuple[int, int]:
        check()
        if not self.store.check(["need"]):
            return -1, 0
        version, upto = self.store.get("need").decode().split(",")
        return int(version), int(upto)

    def refresh(self, check: Callable[[], None]) -> int:
        return self.load(self.published(), check)

    def load(self, version: int, check: Callable[[], None]) -> int:
        """Load ``version``, receiving what was announced first: a scheduled chunk may be told (``need``) of a
        version published after its last ``published()``."""
        self.sync()
        if version == self.version:
            return version
        slot = version % len(self.copies)
        if self.held[slot] != version:
            raise RuntimeError(f"policy version {version} is no longer published (slot {slot} holds "
                               f"{self.held[slot]})")
        start = time.perf_counter()
        copy_weights(self.pairs[slot])
        self.version = version
        self.load_seconds += time.perf_counter() - start
        return version


def beat_until(address: StoreAddress, index: int, stop: threading.Event) -> None:
    """Bump ``beat/<index>`` every second on a connection of its own until ``stop`` (or the store is gone)."""
    try:
        store = address.connect(leader=False)
        while not stop.wait(HEARTBEAT_S):
            store.add(f"beat/{index}", 1)
    except Exception:  # rank 0's store is gone: the main thread finds out too
        return


def serve_generator_task(spec: GeneratorSpec, build: Callable[[torch.nn.Module], object], model: torch.nn.Module,
                         index: int, count: int, log_path: Path, address: Optional[StoreAddress] = None) -> int:
    """Body of generator task ``index`` of ``count``: serve rank 0's chunk requests with ``model`` (the policy's
    architecture on this task's device; ``build`` makes the generator engine around it) until rank 0 closes the
    run. Returns the chunks served."""
    address = address or StoreAddress.of_environment()
    store = address.connect(leader=False)
    stop = threading.Event()
    threading.Thread(target=beat_until, args=(address, index, stop), name="rlscale-generator-beat", daemon=True).start()
    served = 0
    busy = 0.0
    try:
        generator = build(model)  # first: an engine's start then counts in rank 0's start, not in a publication
        queue_size = int(store.get("queue_size"))
        slots = int(store.get("slots"))
        group = weight_group(store, index + 1, count + 1, next(model.parameters()).device)
        replica = RemoteReplica(model, store, group, slots)

        def check() -> None:
            if store.check(["closed"]):
                raise GeneratorsClosed
            replica.sync()

        def wait_for(ready: Callable[[], bool]) -> None:
            wait = WAIT_S
            while not ready():
                check()
                time.sleep(wait)
                wait = min(2 * wait, WAIT_MAX_S)

        while True:
            claim = int(store.add("claimed", 1)) - 1
            key = f"request/{claim}"
            wait_for(lambda: store.check([key]))
            request: ChunkRequest = pickle.loads(store.get(key))
            store.delete_key(key)
            started = time.monotonic()
            done = generate_chunk(spec, generator, replica, request, check)
            busy += time.monotonic() - started - done.waited
            slot = int(store.add("reserved", 1)) - 1
            wait_for(lambda: slot < int(store.add("taken", 0)) + queue_size)
            store.set(f"result/{slot}", pickle.dumps(ChunkResult(request.position, done.completions,
                                                                 done.cpu_seconds, done.compile_seconds)))
            served += 1
            store.set(f"status/{index}", json.dumps({"busy": busy, "load": replica.load_seconds}))
            store.add("posted", 1)
    except GeneratorsClosed:
        store.add("left", 1)
        return served
    except Exception as err:
        Path(log_path).write_text(traceback.format_exc())
        try:
            store.set(f"failed/{index}", f"{type(err).__name__}: {' '.join(str(err).split())}"[:300]
                      + f" (traceback in {log_path})")
        except Exception:  # rank 0's store is gone too
            pass
        raise
    finally:
        stop.set()
