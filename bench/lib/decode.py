"""The GPU workload's decode on the GPU path (``decode_workload``) and the decode loop alone (prefill
subtracted) against the HBM bound: the bytes every decode step must read (weights plus the batch's live
KV cache)."""
from __future__ import annotations

from typing import List

import torch

from lib.shapes import SHAPES, build_model
from lib.timers import timed
from lib.workloads import GPU_WORK, BenchTask, BenchTokenizer, Workload
from rlscale.engines.generators.graph_decode import GraphDecoder
from rlscale.engines.generators.phases import PhaseRules


def decode_bytes(decoder, rows: int, width: int, steps: int) -> float:
    """Fewest bytes the decode steps must read: the weights each step, plus the live KV cache of the batch
    (prompt width + tokens so far, for every row)."""
    kv = decoder.kv_bytes_per_token() * rows * sum(width + t + 1 for t in range(steps))
    return float(decoder.weight_bytes()) * steps + kv


def completion_bytes(weight_bytes: float, kv_bytes_per_token: float, completions, steps: int) -> float:
    """Fewest bytes the decode steps of ``completions`` must read: the weights at each of ``steps``, and each
    completion's KV cache so far (prompt and tokens before it) at each of its tokens."""
    kv = sum(len(c.tokens) * len(c.prompt_ids) + len(c.tokens) * (len(c.tokens) + 1) // 2 for c in completions)
    return float(weight_bytes) * steps + float(kv_bytes_per_token) * kv


def decode_loop(engine, prompts: List[List[int]], work: Workload, steps: int, dev: torch.device, bw_peak: float,
                copy_bw: float) -> dict:
    """The decode loop alone (prefill subtracted; no host-side conversion of the completions) of ``prompts``
    through the engine's DecodeBucket for their number of rows, against the HBM bound."""
    rows = len(prompts)
    ids = torch.tensor(prompts, device=dev)
    cache = engine.decoder.new_cache(rows, work.prompt_len + 1)
    engine.decoder.prefill(cache, ids, torch.ones_like(ids))  # warm-up: the first call of a process is slower
    _, prefill_s = timed(lambda: engine.decoder.prefill(cache, ids, torch.ones_like(ids)), dev)
    bucket = engine.bucket(rows, work.prompt_len)
    budgets = torch.full((rows,), work.think)
    bucket.run(prompts, budgets, 2, steps, 0, None)  # warm-up: a new DecodeBucket captures its graphs
    _, loop_s = timed(lambda: bucket.run(prompts, budgets, 3, steps, 0, None), dev)
    decode_s = loop_s - prefill_s
    need = decode_bytes(engine.decoder, rows, work.prompt_len, steps)
    return dict(prefill_seconds=prefill_s, decode_seconds=decode_s, decode_bytes=need,
                decode_tok_s=rows * steps / decode_s, weight_bytes=engine.decoder.weight_bytes(), hbm_fraction=need / bw_peak / decode_s,
                hbm_fraction_measured_bw=need / copy_bw / decode_s)


def decode_workload(shape_name: str, work: Workload = GPU_WORK, device: str = "cuda"):
    """(engine, prompts, steps) of a workload's decode (the GPU's by default) for ``shape_name``: a
    ``GraphDecoder`` (bf16 head, T = 1) over a random-weight model, its prompts and think budget in steps."""
    tok = BenchTokenizer(SHAPES[shape_name].vocab)
    model = build_model(SHAPES[shape_name], torch.bfloat16, device)
    rules = PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=tok.think_close_ids,
                       interrupt_ids=tok.interrupt_ids, max_answer=work.answer, interruption=True)
    task = BenchTask(tok, work)
    prompts = [tok.encode_prompt(p.prompt) for p in task.train_problems()[:work.prompts]
               for _ in range(work.generations)]
    return GraphDecoder(model, rules, False, 1.0, work.think), prompts, rules.max_steps(work.think)
