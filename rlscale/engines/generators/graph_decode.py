"""The GPU path of the torch generator: static KV cache, fused sampling, one CUDA graph per decode step.

vLLM (the paper's generator, Section 2) cannot be carried to the lent GPUs, so the native generator must
be fast there. One decode step is: LM head (FP32 or bf16, Section 3.2) -> Gumbel-max draw and
logsumexp (``rlscale.engines.kernels.gumbel``) -> interruption forcing and phase bookkeeping
(``rlscale.engines.generators.phases``) -> the generator's log-probability of the chosen token -> forward of that
token through ``StaticKVDecoder`` into the cache. Everything reads and writes fixed buffers and the
step counter is a device tensor, so the whole step is captured once as a CUDA graph and replayed: the
host does one replay per token plus a done-check every ``CHECK_EVERY`` steps.

Shapes are bucketed so few graphs serve every batch, and a run compiles and captures them once, early
(compilation is a fixed cost kept off the compute axis, ``rlscale.engines.compile_cost``): rows round up
(``batch_bucket``; extra rows start ended), the cache holds ``slots`` positions (prompt width + step
budget, rounded up to ``KV_BLOCK``), and one graph is captured per attended length kv_len = KV_BLOCK,
2 KV_BLOCK, ..., slots: step t of a prompt of width W replays the graph of the smallest kv_len > W + t,
so attention reads at most KV_BLOCK - 1 unused slots. A ``DecodeBucket`` (buffers + graphs) serves one row
bucket and never shrinks: a batch of shorter prompts reuses it, and only a prompt longer than any before
makes it grow (``bucket_slots``), so varying prompt widths do not recompile mid-run. ``DecodeBucket`` objects
are kept for the last ``BUCKETS_KEPT`` row buckets (training and evaluation batches alternate).

PipelineRL's in-flight updates (Section 3.1) copy new weights into the model in place; the bucket
then re-fuses its weight copies (``StaticKVDecoder.refresh``, also in place), so the captured graphs
stay valid and the sequences in flight continue with their KV cache.

Rows refilled as they finish (``RefillBucket``, ``GraphDecoder(rows=R)``): a ``DecodeBucket`` holds every
completion of the call for the whole call, so its cache is rows x (prompt + longest completion), 204 GiB for
the 128 completions of one Qwen3-1.7B step at the paper's 12,288 + 2,048 tokens. A ``RefillBucket`` holds R
rows; each row has its own slot and position (the cache write is a per-row indexed store, attention a
per-row mask and length), and at every done-check (``CHECK_EVERY`` steps) the rows whose trace has ended hand their completion
back and take the next pending prompts of the call, prefilled into those rows outside the graph while the
other rows keep their caches. The shapes stay fixed, so the decode step is the same captured graph. The
cache (the memory of the generator) is R x (prompt + longest completion): it follows R, not the rows of
the call; this static cache of R refilled rows is the equivalent of a paged cache the generator uses. The
interruption of Section 3.2, the log-probabilities and the policy version of every token are kept per
completion (``TracePhases``: each row's history at its own column), and the completions come back in the
order of the prompts, so every group is whole. The draw of a token is keyed by (seed, decode step of the
call, row), so with R at least the rows of the call's bucket every completion starts at step 0 in its own
row and the samples are those of a ``DecodeBucket``; with fewer rows they are other draws of the same
distribution. An ended row decodes padding until the next check (at most ``CHECK_EVERY`` - 1 steps); once no
prompt is pending, it attends to the few slots it has decoded padding into since (``RefillBucket.idle``).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Deque, Dict, List, Optional, Sequence

import torch

from rlscale.core.types import Completion
from rlscale.engines.compile_cost import STALLS
from rlscale.engines.generators.phases import PhaseRules, TracePhases, left_pad
from rlscale.engines.generators.static_decoder import StaticKVDecoder
from rlscale.engines.kernels.gumbel import gumbel_sample

KV_BLOCK = 64
CHECK_EVERY = 8
BUCKETS_KEPT = 2


def batch_bucket(rows: int) -> int:
    """Rows of the bucket serving ``rows`` prompts: a power of two up to 64, then a multiple of 64."""
    if rows <= 64:
        return max(8, 1 << (rows - 1).bit_length())
    return -(-rows // 64) * 64


def bucket_slots(width: int, steps: int, current: int = 0) -> int:
    """KV slots of the bucket for prompts of ``width`` tokens and ``steps`` decode steps: their need rounded
    up to ``KV_BLOCK``, or the ``current`` bucket's slots when those suffice."""
    return max(current, -(-(width + steps) // KV_BLOCK) * KV_BLOCK)


def record_step(phases: TracePhases, logits: torch.Tensor, draw: torch.Tensor, lse: torch.Tensor,
                inv_temp: float) -> torch.Tensor:
    """The step's token (``TracePhases.choose`` of the draw), recorded with its log-probability logits / T -
    lse (``TracePhases.advance``); compiled on GPU into a few kernels instead of ~40 small launches (0.1 ms
    of a 1.8 ms SmolLM2 step on an H200)."""
    token, forcing = phases.choose(draw)
    logp = logits.gather(1, token.unsqueeze(1)).squeeze(1).float() * inv_temp - lse
    phases.advance(token, logp, forcing)
    return token


class DecodeBucket:
    """Buffers (cache, phases, step inputs) and the captured step graphs of one (rows, slots) shape."""

    def __init__(self, decoder: StaticKVDecoder, rules: PhaseRules, rows: int, slots: int, steps: int,
                 temperature: float, graphs: bool, record: Callable[..., torch.Tensor] = record_step):
        self.decoder = decoder
        self.record = record
        self.rows, self.slots = rows, slots
        self.inv_temp = 1.0 / temperature
        dev = decoder.device
        self.cache = decoder.new_cache(rows, slots)
        self.phases = TracePhases(rules, rows, steps, dev)
        self.hidden = torch.zeros((rows, decoder.model.config.hidden_size), dtype=decoder.dtype, device=dev)
        self.pos = torch.zeros(rows, dtype=torch.long, device=dev)
        self.start = torch.zeros(1, dtype=torch.long, device=dev)  # slot of step 0 = prompt width
        self.seed = torch.zeros(1, dtype=torch.long, device=dev)
        decoder.rope_table(slots)
        self.graphs: Dict[int, torch.cuda.CUDAGraph] = {}
        if graphs:
            with STALLS.stall():
                self._capture()

    @torch.no_grad()
    def step(self, kv_len: int) -> None:
        """One decode step (see the module docstring), in place on the bucket's buffers."""
        self.decode_token(self.start + self.phases.step, kv_len)
        self.pos += 1

    def decode_token(self, slot: torch.Tensor, kv_len: int) -> None:
        """Draw and record every row's token, then run it through the decoder into ``slot`` ([1] or [rows])."""
        ph = self.phases
        logits = self.decoder.logits(self.hidden)
        draw, lse = gumbel_sample(logits, self.inv_temp, self.seed + ph.step)
        token = self.record(ph, logits, draw, lse, self.inv_temp)
        self.hidden.copy_(self.decoder.decode(self.cache, token, self.pos, slot, kv_len))

    def _capture(self) -> None:
        """One graph per attended length; the warm-up runs (and the captures) scribble on the buffers,
        which every ``run`` resets."""
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for kv_len in range(KV_BLOCK, self.slots + 1, KV_BLOCK):
            self.phases.step.zero_()
            with torch.cuda.stream(side):
                self.step(kv_len)
            torch.cuda.current_stream().wait_stream(side)
            self.phases.step.zero_()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.step(kv_len)
            self.graphs[kv_len] = graph
        torch.cuda.synchronize()

    @torch.no_grad()
    def run(self, prompts: Sequence[List[int]], budgets: torch.Tensor, seed: int, steps: int,
            version: int, version_hook: Optional[Callable[[], int]]) -> List[int]:
        """Sample up to ``steps`` tokens for ``prompts`` into ``phases``; returns the version of every step."""
        ph, dec = self.phases, self.decoder
        dec.refresh()
        ids, attn = left_pad(prompts, self.rows, ph.rules.pad_id, dec.device)
        width = ids.shape[1]
        ph.reset(budgets.to(dec.device), len(prompts))
        hidden, next_pos = dec.prefill(self.cache, ids, attn)
        self.hidden.copy_(hidden)
        self.pos.copy_(next_pos)
        self.start.fill_(width)
        self.seed.fill_(seed)
        versions = []
        for t in range(steps):
            version = self.current_version(version, version_hook)
            versions.append(version)
            self.replay(width + t + 1)
            if (t + 1) % CHECK_EVERY == 0 and ph.all_done():
                break
        return versions

    def current_version(self, version: int, version_hook: Optional[Callable[[], int]]) -> int:
        """The policy version before the next step: ``version_hook``'s (an in-flight update, Section 3.1, after
        which the decoder re-fuses its weight copies), else ``version``."""
        if version_hook is None:
            return version
        new = version_hook()
        if new != version:
            self.decoder.refresh()
        return new

    def replay(self, attended: int) -> None:
        """One decode step whose rows attend to fewer than ``attended`` slots: the graph of the smallest kv_len
        that covers them (the eager step where none is captured)."""
        kv_len = -(-attended // KV_BLOCK) * KV_BLOCK
        graph = self.graphs.get(kv_len)
        if graph is not None:
            graph.replay()
        else:
            self.step(kv_len)


@dataclass(frozen=True)
class HeldTrace:
    """The completion a row of a ``RefillBucket`` samples: its index in the call, the decode step of the
    call it began at and the width its prompt was prefilled at (its first decode slot)."""

    index: int
    begin: int
    width: int

    def attends(self, step: int) -> int:
        """Slots the row attends to at decode step ``step`` of the call."""
        return self.width + step - self.begin + 1


class RefillBucket(DecodeBucket):
    """A ``DecodeBucket`` whose rows are refilled with the call's pending prompts as their traces end (module
    docstring): each row decodes at its own slot ``slot`` [rows] and position."""

    def __init__(self, decoder: StaticKVDecoder, rules: PhaseRules, rows: int, slots: int, steps: int,
                 temperature: float, graphs: bool, record: Callable[..., torch.Tensor] = record_step):
        self.slot = torch.zeros(rows, dtype=torch.long, device=decoder.device)
        super().__init__(decoder, rules, rows, slots, steps, temperature, graphs, record)

    @torch.no_grad()
    def step(self, kv_len: int) -> None:
        """One decode step; a row's slot and position stop at the last slot (an ended row, until refilled)."""
        self.decode_token(self.slot, kv_len)
        self.pos.add_(1).clamp_(max=self.slots - 1)
        self.slot.add_(1).clamp_(max=self.slots - 1)

    @torch.no_grad()
    def sample(self, prompts: Sequence[List[int]], budgets: torch.Tensor, seed: int, version: int,
               version_hook: Optional[Callable[[], int]], decode) -> tuple[List[Completion], int]:
        """(completions of ``prompts`` in their order, decode steps until the last trace ended)."""
        ph = self.phases
        self.decoder.refresh()
        ph.reset(budgets[:0], 0)
        for t in (self.cache.mask, self.pos, self.slot, self.hidden):
            t.zero_()
        self.seed.fill_(seed)
        pending: Deque[int] = deque(range(len(prompts)))
        held: Dict[int, HeldTrace] = {}
        out: List[Optional[Completion]] = [None] * len(prompts)
        versions: List[int] = []
        self.fill(list(range(self.rows)), pending, held, prompts, budgets, 0)
        step = last = 0
        while held:
            version = self.current_version(version, version_hook)
            versions.append(version)
            self.replay(min(self.slots, max(trace.attends(step) for trace in held.values())))
            step += 1
            if step % CHECK_EVERY:
                continue
            done = ph.done.tolist()
            ended = [row for row in held if done[row]]
            if not ended:
                continue
            traces = [held.pop(row) for row in ended]
            finished = ph.completions([prompts[t.index] for t in traces], versions, decode, rows=ended,
                                      starts=[t.begin for t in traces])
            for trace, completion in zip(traces, finished):
                out[trace.index] = completion
                last = max(last, trace.begin + len(completion.tokens))
            self.fill(ended, pending, held, prompts, budgets, step)
        return [c for c in out if c is not None], last

    def idle(self, rows: List[int]) -> None:
        """Rows left without a prompt (the call's last traces are running) attend from slot 0 on, so their
        decode steps read a few slots instead of their ended trace's cache."""
        index = torch.tensor(rows, dtype=torch.long, device=self.slot.device)
        self.cache.mask[index] = False
        self.slot[index] = 0

    def fill(self, free: List[int], pending: Deque[int], held: Dict[int, HeldTrace], prompts: Sequence[List[int]],
             budgets: torch.Tensor, step: int) -> None:
        """Prefill the next pending prompts into rows ``free`` (the rows past them get padding) and start their
        traces at decode step ``step``."""
        take = [pending.popleft() for _ in range(min(len(free), len(pending)))]
        if len(take) < len(free):
            self.idle(free[len(take):])
        if not take:
            return
        dec = self.decoder
        ids, attn = left_pad([prompts[j] for j in take], len(free), self.phases.rules.pad_id, dec.device)
        rows = torch.tensor(free, dtype=torch.long, device=dec.device)
        hidden, next_pos = dec.prefill(self.cache, ids, attn, rows=rows)
        self.hidden[rows] = hidden
        self.pos[rows] = next_pos
        self.slot[rows] = ids.shape[1]
        self.phases.start_rows(rows[:len(take)], budgets[take])
        for row, index in zip(free, take):
            held[row] = HeldTrace(index, step, ids.shape[1])


class GraphDecoder:
    """The torch generator's GPU engine: ``generate`` samples a batch through a cached ``DecodeBucket``, or with
    ``rows`` > 0 through a ``RefillBucket`` of at most ``rows`` rows (the call's bucket of rows when that is
    fewer)."""

    def __init__(self, model, rules: PhaseRules, fp32_head: bool, temperature: float, max_budget: int,
                 graphs: bool = True, compiled: bool = True, rows: int = 0):
        on_gpu = next(model.parameters()).is_cuda
        self.decoder = StaticKVDecoder(model, fp32_head, compiled=compiled and on_gpu)
        self.record = torch.compile(record_step, fullgraph=True) if compiled and on_gpu else record_step
        self.rules = rules
        self.temperature = temperature
        self.steps = rules.max_steps(max_budget)
        self.graphs = graphs and on_gpu
        self.rows = rows
        self.buckets: "OrderedDict[tuple[int, bool], DecodeBucket]" = OrderedDict()

    def bucket(self, rows: int, width: int, refill: bool = False) -> DecodeBucket:
        """The bucket of ``rows`` (a ``RefillBucket`` of exactly ``rows`` with ``refill``), made (or grown) when
        it cannot hold prompts of ``width`` tokens."""
        key = (rows if refill else batch_bucket(rows), refill)
        current = self.buckets.pop(key, None)
        slots = bucket_slots(width, self.steps, current.slots if current is not None else 0)
        if current is None or current.slots < slots:
            while len(self.buckets) >= BUCKETS_KEPT:
                self.buckets.popitem(last=False)
            kind = RefillBucket if refill else DecodeBucket
            current = kind(self.decoder, self.rules, key[0], slots, self.steps, self.temperature, self.graphs,
                           record=self.record)
        self.buckets[key] = current
        return current

    def refill_rows(self, prompts: int) -> int:
        """Rows of the ``RefillBucket`` for a call of ``prompts``: the call's bucket of rows when ``rows`` holds
        it, else ``rows``."""
        bucket = batch_bucket(prompts)
        return bucket if bucket <= self.rows else self.rows

    @torch.no_grad()
    def generate(self, prompts: Sequence[List[int]], budgets: torch.Tensor, seed: int, version: int,
                 version_hook: Optional[Callable[[], int]], decode) -> tuple[List[Completion], int]:
        """(completions, decode steps) for ``prompts`` with think ``budgets`` [n] and sampling ``seed``."""
        width = max(len(p) for p in prompts)
        if self.rows:
            bucket = self.bucket(self.refill_rows(len(prompts)), width, refill=True)
            return bucket.sample(prompts, budgets, seed, version, version_hook, decode)
        bucket = self.bucket(len(prompts), width)
        steps = self.rules.max_steps(int(budgets.max()))
        versions = bucket.run(prompts, budgets, seed, steps, version, version_hook)
        return bucket.phases.completions(prompts, versions, decode), bucket.phases.steps_taken()
