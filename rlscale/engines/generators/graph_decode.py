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
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict, List, Optional, Sequence

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
        ph = self.phases
        logits = self.decoder.logits(self.hidden)
        draw, lse = gumbel_sample(logits, self.inv_temp, self.seed + ph.step)
        slot = self.start + ph.step
        token = self.record(ph, logits, draw, lse, self.inv_temp)
        self.hidden.copy_(self.decoder.decode(self.cache, token, self.pos, slot, kv_len))
        self.pos += 1

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
            if version_hook is not None:
                new = version_hook()
                if new != version:
                    dec.refresh()
                version = new
            versions.append(version)
            kv_len = -(-(width + t + 1) // KV_BLOCK) * KV_BLOCK
            graph = self.graphs.get(kv_len)
            if graph is not None:
                graph.replay()
            else:
                self.step(kv_len)
            if (t + 1) % CHECK_EVERY == 0 and ph.all_done():
                break
        return versions


class GraphDecoder:
    """The torch generator's GPU engine: ``generate`` samples a batch through a cached ``DecodeBucket``."""

    def __init__(self, model, rules: PhaseRules, fp32_head: bool, temperature: float, max_budget: int,
                 graphs: bool = True, compiled: bool = True):
        on_gpu = next(model.parameters()).is_cuda
        self.decoder = StaticKVDecoder(model, fp32_head, compiled=compiled and on_gpu)
        self.record = torch.compile(record_step, fullgraph=True) if compiled and on_gpu else record_step
        self.rules = rules
        self.temperature = temperature
        self.steps = rules.max_steps(max_budget)
        self.graphs = graphs and on_gpu
        self.buckets: "OrderedDict[int, DecodeBucket]" = OrderedDict()

    def bucket(self, rows: int, width: int) -> DecodeBucket:
        """The bucket of ``rows``, made (or grown) when it cannot hold prompts of ``width`` tokens."""
        bucket = batch_bucket(rows)
        current = self.buckets.pop(bucket, None)
        slots = bucket_slots(width, self.steps, current.slots if current is not None else 0)
        if current is None or current.slots < slots:
            while len(self.buckets) >= BUCKETS_KEPT:
                self.buckets.popitem(last=False)
            current = DecodeBucket(self.decoder, self.rules, bucket, slots, self.steps, self.temperature,
                                    self.graphs, record=self.record)
        self.buckets[bucket] = current
        return current

    @torch.no_grad()
    def generate(self, prompts: Sequence[List[int]], budgets: torch.Tensor, seed: int, version: int,
                 version_hook: Optional[Callable[[], int]], decode) -> tuple[List[Completion], int]:
        """(completions, decode steps) for ``prompts`` with think ``budgets`` [n] and sampling ``seed``."""
        bucket = self.bucket(len(prompts), max(len(p) for p in prompts))
        steps = self.rules.max_steps(int(budgets.max()))
        versions = bucket.run(prompts, budgets, seed, steps, version, version_hook)
        return bucket.phases.completions(prompts, versions, decode), bucket.phases.steps_taken()
