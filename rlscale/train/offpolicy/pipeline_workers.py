"""Generator processes of PipelineRL-k (Section 3.1; the paper splits 64 generator GPUs from 16 trainer
GPUs). Each process owns a replica of the policy and a generator engine; it takes chunk requests
(prompt tokens) from the trainer, samples ``generations`` completions per prompt while refreshing its
weights between decode steps (``version_hook``), writes the completions to a spool file in /dev/shm and
announces them on a bounded queue (``offpolicy.queue_size`` chunks): a full queue stalls the generators.

Failure handling, never a hang: the trainer checks every generator's exit code and heartbeat whenever it
waits (``GeneratorPool.check``) and raises ``RuntimeError("generator process 1 exited with code -9")``;
a generator whose parent is gone exits at its next decode step or queue poll. Only small messages cross
the pipes (a killed writer cannot leave a torn one behind); completions travel through files.

Processes start through a ``forkserver`` (CUDA- and OpenMP-safe like ``spawn``; the server imports
torch once, so further generators start in milliseconds).
"""
from __future__ import annotations

import pickle
import queue
import shutil
import tempfile
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional

import torch
import torch.multiprocessing as mp

from rlscale.core.protocols import PolicyTokenizer
from rlscale.core.types import Completion
from rlscale.engines.compile_cost import STALLS
from rlscale.engines.generators.build import GeneratorSettings, build_generator
from rlscale.gpus import generator_gpus
from rlscale.runfolder.atomic import atomic_write
from rlscale.train.compute import JobShape
from rlscale.train.offpolicy.pipeline_weights import (POLL_S, NewestVersions, PolicyReplica, ScheduledVersions, SharedWeights,
                                            Weights)

HEARTBEAT_TIMEOUT_S = 300.0
JOIN_TIMEOUT_S = 10.0
SPOOL_ROOT = Path("/dev/shm")


@dataclass
class GeneratorSpec:
    """What every generator process is built from: the generator's own settings and the in-flight update schedule,
    ``offpolicy.update_every_tokens`` (Section 3.1)."""

    generator: GeneratorSettings
    update_every_tokens: int
    tok: PolicyTokenizer
    generations: int
    threads: int


@dataclass
class ChunkRequest:
    """Prompts to complete: ``position`` is the stream index of the chunk's first group; ``seed`` seeds
    the chunk's sampling RNG (so it does not depend on which generator takes it); ``version`` is the policy
    version published when the chunk was issued (where scheduled updates start)."""

    position: int
    prompts: List[List[int]]
    seed: int
    version: int = 0


@dataclass
class ChunkReady:
    """A generator's announcement of a finished chunk (small, so one atomic pipe write); ``compile_seconds``
    of its wall time went to compiling and capturing graphs."""

    position: int
    path: str
    cpu_seconds: float
    compile_seconds: float = 0.0


@dataclass
class ChunkResult:
    position: int
    completions: List[Completion]
    cpu_seconds: float
    compile_seconds: float = 0.0


class GeneratorStatus:
    """Per-generator counters in shared memory, written by the generator and read by the trainer:
    last heartbeat, busy seconds so far, start of the current busy span (0 when idle), weight-load
    seconds so far, chunks finished so far, decode steps so far (what a chunk of the paper's lengths shows
    while it runs, minutes before it finishes). Times are ``time.monotonic()`` (one clock for all processes of
    the machine)."""

    HEARTBEAT, BUSY_TOTAL, BUSY_SINCE, LOAD_TOTAL, FINISHED, STEPS = range(6)
    FIELDS = STEPS + 1

    def __init__(self, ctx, n: int):
        self.values = ctx.RawArray("d", self.FIELDS * n)
        self.n = n

    def _at(self, rank: int, field: int) -> int:
        return self.FIELDS * rank + field

    def stepped(self, rank: int) -> None:
        """Generator ``rank`` made one decode step."""
        self.values[self._at(rank, self.STEPS)] += 1

    def decode_steps(self) -> int:
        """Decode steps of all generators so far."""
        return int(sum(self.values[self._at(rank, self.STEPS)] for rank in range(self.n)))

    def beat(self, rank: int) -> None:
        self.values[self._at(rank, self.HEARTBEAT)] = time.monotonic()

    def heartbeat_age(self, rank: int) -> float:
        return time.monotonic() - self.values[self._at(rank, self.HEARTBEAT)]

    def started(self, rank: int) -> None:
        self.values[self._at(rank, self.BUSY_SINCE)] = time.monotonic()

    def finished(self, rank: int, load_seconds: float, waited: float = 0.0) -> None:
        """A chunk is done (its announcement may still wait for room in the queue); ``waited`` seconds of
        it went to waiting for scheduled versions, which count as idle."""
        since = self._at(rank, self.BUSY_SINCE)
        self.values[self._at(rank, self.BUSY_TOTAL)] += time.monotonic() - self.values[since] - waited
        self.values[since] = 0.0
        self.values[self._at(rank, self.LOAD_TOTAL)] = load_seconds
        self.values[self._at(rank, self.FINISHED)] += 1

    def busy_seconds(self) -> float:
        """Busy seconds of all generators so far, the spans in progress included."""
        now = time.monotonic()
        total = 0.0
        for rank in range(self.n):
            since = self.values[self._at(rank, self.BUSY_SINCE)]
            total += self.values[self._at(rank, self.BUSY_TOTAL)] + (now - since if since else 0.0)
        return total

    def load_seconds(self) -> float:
        return sum(self.values[self._at(rank, self.LOAD_TOTAL)] for rank in range(self.n))

    def chunks_finished(self) -> int:
        return int(sum(self.values[self._at(rank, self.FINISHED)] for rank in range(self.n)))


@dataclass
class GeneratedChunk:
    """A chunk's completions and what sampling them cost: CPU seconds, seconds compiling and capturing graphs,
    seconds waiting for scheduled versions (idle)."""

    completions: List[Completion]
    cpu_seconds: float
    compile_seconds: float
    waited: float


def generate_chunk(spec: GeneratorSpec, generator, replica, request: ChunkRequest,
                   check: Callable[[], None], stepped: Callable[[], None] = lambda: None) -> GeneratedChunk:
    """Sample ``spec.generations`` completions of each of the request's prompts with the request's seed, the
    replica (a ``PolicyReplica`` or a remote one) taking new versions between decode steps: the newest
    (``NewestVersions``) or the chunk's schedule (``ScheduledVersions``); ``stepped`` is called at every decode
    step."""
    cpu, stalled = time.process_time(), STALLS.seconds
    prompts = [p for p in request.prompts for _ in range(spec.generations)]
    every = spec.update_every_tokens
    versions = (ScheduledVersions(replica, request.version, request.position, every, check) if every
                else NewestVersions(replica, check))

    def version_hook() -> int:
        stepped()
        return versions()

    completions = generator.generate(prompts, torch.Generator().manual_seed(request.seed),
                                     version=versions.prefill(), version_hook=version_hook)
    return GeneratedChunk(completions, time.process_time() - cpu, STALLS.seconds - stalled, versions.waited)


def _poll(action: Callable[[], Any], check: Callable[[], None]) -> Any:
    """Run a blocking queue operation in POLL_S slices, calling ``check`` between them."""
    while True:
        try:
            return action()
        except (queue.Empty, queue.Full):
            check()


def generator_main(rank: int, spec: GeneratorSpec, device: str, shared: SharedWeights, requests, results,
                   status: GeneratorStatus, spool: str, log_path: str) -> None:
    """Body of generator process ``rank``: serve chunk requests until terminated or orphaned."""
    trainer = mp.parent_process()  # the process that started us (not the forkserver that forked us)

    def check() -> None:
        status.beat(rank)
        if not trainer.is_alive():
            shutil.rmtree(spool, ignore_errors=True)
            raise SystemExit(0)

    try:
        if spec.threads > 0:
            torch.set_num_threads(spec.threads)
        if torch.device(device).type == "cuda":
            torch.cuda.set_device(device)  # kernels launch on the current device
            STALLS.hook_compiler()
        replica = PolicyReplica(shared, torch.device(device))
        generator = build_generator(spec.generator, replica.model, spec.tok, torch.device(device))
        while True:
            request: ChunkRequest = _poll(lambda: requests.get(timeout=POLL_S), check)
            status.started(rank)
            done = generate_chunk(spec, generator, replica, request, check, lambda: status.stepped(rank))
            path = Path(spool) / f"chunk-{request.position}.pkl"
            atomic_write(path, lambda tmp: tmp.write_bytes(pickle.dumps(done.completions)))
            ready = ChunkReady(request.position, str(path), done.cpu_seconds, done.compile_seconds)
            status.finished(rank, replica.load_seconds, done.waited)
            _poll(lambda: results.put(ready, timeout=POLL_S), check)
    except Exception:
        Path(log_path).write_text(traceback.format_exc())
        raise


def generator_devices(trainer_device: torch.device, n: int) -> List[str]:
    """CPU: every generator on the CPU. CUDA: the node's trainer ranks (``LOCAL_WORLD_SIZE``) on the first GPUs
    this process sees, the generators on the others, round robin (``rlscale.gpus.generator_gpus``); a single
    trainer on a single GPU shares it with them."""
    if trainer_device.type != "cuda":
        return ["cpu"] * n
    trainers = JobShape.of_environment().tasks_per_node
    return [f"cuda:{index}" for index in generator_gpus(trainers, torch.cuda.device_count(), n)]


class GeneratorPool:
    """The trainer's handle on its generator processes: start, publish weights, submit chunks,
    receive finished ones, watch liveness, stop."""

    def __init__(self, spec: GeneratorSpec, devices: List[str], model: torch.nn.Module, slots: int, queue_size: int,
                 log_dir: Path):
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__, type(model).__module__])  # the server imports these once
        self.shared = SharedWeights(model, ctx, slots=slots)
        self.requests = ctx.Queue()
        self.results = ctx.Queue(maxsize=queue_size)
        self.status = GeneratorStatus(ctx, len(devices))
        self.spool = tempfile.mkdtemp(prefix="rlscale-pipeline-", dir=SPOOL_ROOT if SPOOL_ROOT.is_dir() else None)
        self.remove_spool = weakref.finalize(self, shutil.rmtree, self.spool, ignore_errors=True)
        self.logs = [Path(log_dir) / f"generator-{rank}.log" for rank in range(len(devices))]
        self.received = 0
        self.procs = []
        for rank, device in enumerate(devices):
            self.status.beat(rank)
            proc = ctx.Process(target=generator_main, name=f"rlscale-generator-{rank}", daemon=True,
                               args=(rank, spec, device, self.shared, self.requests, self.results, self.status,
                                     self.spool, str(self.logs[rank])))
            proc.start()
            self.procs.append(proc)

    @property
    def size(self) -> int:
        return len(self.procs)

    def check(self) -> None:
        """Raise RuntimeError naming the first generator that exited or stopped answering."""
        for rank, proc in enumerate(self.procs):
            if proc.exitcode is not None:
                log = self.logs[rank]
                detail = log.read_text().strip().splitlines()[-1] if log.exists() else ""
                raise RuntimeError(f"generator process {rank} exited with code {proc.exitcode}"
                                   + (f": {detail} (traceback in {log})" if detail else ""))
            age = self.status.heartbeat_age(rank)
            if age > HEARTBEAT_TIMEOUT_S:
                raise RuntimeError(f"generator process {rank} is unresponsive: no heartbeat for {age:.0f} s")

    def waiting(self) -> int:
        """Finished chunks the trainer has not taken yet (in the queue or blocked on it)."""
        return self.status.chunks_finished() - self.received

    def publish(self, weights: Weights, version: int) -> float:
        """Publish ``weights`` (a state dict) as ``version``; returns the seconds it took."""
        return self.shared.publish(weights, version, self.check)

    def published_weights(self, version: int) -> Weights:
        """A CPU copy of a version still published (scheduled updates keep the last k + 1)."""
        return self.shared.weights(version)

    def need(self, version: int, upto: int) -> None:
        """Tell the generators that the trainer, at ``version``, needs the stream up to ``upto`` groups."""
        self.shared.set_need(version, upto, self.check)

    def submit(self, request: ChunkRequest) -> None:
        self.requests.put(request)

    def receive(self, timeout: float) -> Optional[ChunkResult]:
        """The next finished chunk, or None when none arrives within ``timeout`` seconds. Raises if a
        generator died."""
        self.check()
        try:
            ready: ChunkReady = self.results.get(timeout=timeout)
        except queue.Empty:
            return None
        self.received += 1
        path = Path(ready.path)
        completions = pickle.loads(path.read_bytes())
        path.unlink()
        return ChunkResult(ready.position, completions, ready.cpu_seconds, ready.compile_seconds)

    def close(self) -> None:
        """Stop the generators (their work in flight is dropped) and remove the spool."""
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.join(JOIN_TIMEOUT_S)
        self.requests.cancel_join_thread()
        self.remove_spool()
