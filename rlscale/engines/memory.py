"""Memory per GPU of one run's job, estimated from the model's shape and the run config before anything is
submitted (``rlscale sweep --dry-run``), so a job can be sized for a model that is not on this machine (a
``config.json`` is enough).

For P parameters of b bytes (2 for bf16/fp16 weights, 4 for float32), a Llama-style decoder of L layers,
hidden size h, key/value width k (KV heads x head size), MLP width i and vocabulary V, a micro-batch of T
tokens (its rows x the longest sequence: prompt + think budget + answer budget), N trainer ranks:

- **weights**: P b, split over the ranks under ZeRO-3, where rank 0 also keeps the model whole (P b, its
  ``whole_weights``), the copy its generator samples from and PipelineRL publishes
  (``engines.learners.deepspeed_learner``).
- **optimizer**: AdamW's two float32 moments (8P), the weights' gradients (P b) and, for a low-precision
  model, its float32 master weights and their gradients (8P, ``engines.learners.torch_learner``). DeepSpeed
  ZeRO-2 and ZeRO-3 split all of it over the ranks.
- **activations** kept for the backward of one micro-batch. Without activation checkpointing
  (``engine.activation_checkpointing``): every layer's, T L (6h + 2k + 2i) b. These are the inputs of a
  layer's two norms and four projections, queries, keys and values, the attention output (SDPA keeps no score
  matrix), and the MLP's gate and up products, whose pointwise work the compiled backward recomputes. With it:
  each layer's input, T L h b, and the activations of the one layer the backward recomputes at a time,
  T (6h + 2k + 2i) b.
- **LM head**: C V 2 b_h, the logits kept for the backward and their gradient, b_h = 4 with the FP32 head of
  Section 3.2, else the weights' b (``engines.models.policy.SelectedLogprobs``), for the C positions of one
  chunk of the head (``HEAD_CHUNK_TOKENS``; ``engines.models.policy.chunked_head_logprobs``), or T when the
  micro-batch has fewer.
- **KV cache** of a generator: the rows it samples at once x longest sequence x 2 L k b (the torch
  generator's static cache, ``engines.generators.static_decoder``, holds each row at full length). The rows
  are those of a chunk, or with ``engine.generator_rows`` = R > 0 at most R: the rows the generator refills
  with the chunk's pending prompts as their traces end (``engines.generators.graph_decode.RefillBucket``).
  The synchronous loop samples a step's rows on the trainer's GPU; PipelineRL's generators (Section 3.1) are
  processes with their own weights and cache, each sampling chunks of ceil(prompts / generators) groups
  (``train.offpolicy.pipeline``), on GPUs of their own when the job has them, else on the trainer's.
- **decoder copies**: the torch generator's GPU path (``engines.generators.static_decoder``) keeps each layer's
  q/k/v and gate/up weights fused, L h (q + 2k + 2i) b, in every process that has a generator: rank 0 (its own
  generator samples the synchronous loop's rows and the evaluations) and each PipelineRL generator. vLLM's
  engine is not counted.
- **published weights** of PipelineRL: the versions a generator may still load, P b each: the last k + 1 with
  scheduled in-flight updates (``offpolicy.update_every_tokens`` > 0), else the newest (``PipelineConfig.slots``).
  Generator processes read them from the trainer's GPU (``train.offpolicy.pipeline_weights.SharedWeights``, CUDA
  IPC); a generator task keeps them on its own GPU beside its model (``train.offpolicy.pipeline_remote``).
  ``generator_rows`` resolves ``engine.generator_rows`` on a card: ``auto`` takes every row of a chunk when the
  estimate fits ``USABLE_FRACTION`` of it, else the most rows that fit; a set number that does not fit is
  refused in one line naming the field, before the run samples anything.

On one H200 (``bench/results/gpu_bench-H200-fp32-head.md``: 256 rows of 640 tokens, micro-batches of 32 rows,
the synchronous loop, the head on whole micro-batches and no checkpointing) the peaks measured by
``torch.cuda.max_memory_allocated`` were 17.2 and 21.0 GiB (SmolLM2-135M, bf16 and FP32 head) and 32.2 and
43.6 GiB (a Qwen2-0.5B shape); this estimate gives 17.8, 21.6, 37.2 and 48.8
(``tests/unit/engines/test_memory_estimate.py``), 3-15 % above. Checkpointing and the head's chunks at billions
of parameters are measured by ``bench/long_sequence_bench.py``, a generator GPU's refilled rows by
``bench/generator_rows_bench.py``; untested: several ranks, a PipelineRL job's trainer GPU at billions of
parameters (``bench/gpu_bench.py --sections long``). ``check_trainer_fits`` refuses a run whose trainer GPU does
not fit, before it samples. Allocator fragmentation and NCCL buffers come on top: leave a tenth of
the card free (``USABLE_FRACTION``, which ``engine.activation_checkpointing=auto`` keeps to).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Dict, Optional

from rlscale.config.schema import RunConfig
from rlscale.gpus import generator_gpus

GIB = 2 ** 30
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# the prompt length a dry run counts unless told (``rlscale sweep --dry-run --prompt-tokens``)
DEFAULT_PROMPT_TOKENS = 512
# tokens allowed for the interruption phrase of a trace that runs out of think budget (Section 3.2)
PHRASE_TOKENS = 16
# positions per pass of the learners' LM head (``engines.models.policy.chunked_head_logprobs``): float32 logits and
# their gradient of 4.6 GiB at Qwen3-8B's 152k vocabulary, and GEMMs of 4,096 rows, large enough for full speed
HEAD_CHUNK_TOKENS = 4096
# the share of a GPU's memory an estimate may fill (allocator fragmentation and NCCL buffers take the rest)
USABLE_FRACTION = 0.9


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a decoder (from its Hugging Face config)."""

    params: int
    layers: int
    hidden: int
    kv_width: int  # key/value heads x head size
    intermediate: int
    vocab: int
    q_width: int = 0  # query heads x head size (0: the hidden size)

    @property
    def fused_params(self) -> int:
        """Parameters of the torch generator's fused weights: each layer's q/k/v and gate/up projections."""
        return self.layers * self.hidden * ((self.q_width or self.hidden) + 2 * self.kv_width + 2 * self.intermediate)

    @classmethod
    def of_config(cls, config) -> "ModelShape":
        """From a transformers ``PretrainedConfig`` of a Llama-style decoder (Llama, Qwen2, Qwen3): the
        parameters counted from its sizes (embeddings, attention with its biases, gated MLP, norms, the head
        unless tied)."""
        h, layers, i, vocab = config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or h // heads
        q, kv = heads * head_dim, kv_heads * head_dim
        bias = q + 2 * kv if getattr(config, "attention_bias", False) or config.model_type == "qwen2" else 0
        qk_norms = 2 * head_dim if config.model_type == "qwen3" else 0
        per_layer = h * q + 2 * h * kv + q * h + bias + qk_norms + 3 * h * i + 2 * h
        head = 0 if getattr(config, "tie_word_embeddings", False) else vocab * h
        return cls(vocab * h + layers * per_layer + h + head, layers, h, kv, i, vocab, q)


@dataclass(frozen=True)
class JobLayout:
    """The run settings the estimate reads (``MemoryEstimate.of``'s caller builds it from the run config)."""

    weight_bytes: int  # 2 or 4
    fp32_head: bool
    learner: str  # "torch" or "deepspeed"
    zero_stage: int
    ranks: int  # trainer ranks of the job
    rows: int  # sequences per step (prompts x generations)
    chunk_rows: int  # sequences one generator samples at once
    micro_batch: int  # rows per micro-batch of a rank (0: all its rows)
    sequence: int  # longest sequence: prompt + completion budget
    generators: int  # PipelineRL generator processes (0: the synchronous loop, the trainer samples)
    per_gpu: int  # generator processes on the busiest generator GPU (0: they share the trainer's GPU)
    checkpointing: bool  # activation checkpointing per decoder layer
    head_chunk: int  # positions per pass of the LM head (0: the whole micro-batch)
    generator_rows: Optional[int] = 0  # rows a generator samples at once (0: a chunk's; None: auto, counted as 0)
    published: int = 0  # copies of the weights PipelineRL keeps for publication (its slots; 0 without generators)
    generator_tasks: bool = False  # the generators are tasks of the job (they keep those copies, not the trainer)
    decoder_copies: bool = False  # torch generators, which keep fused copies of some weights (0 for vLLM)

    @property
    def cache_rows(self) -> int:
        """Rows of one generator's KV cache: a chunk's, or ``generator_rows`` when fewer."""
        return min(self.generator_rows, self.chunk_rows) if self.generator_rows else self.chunk_rows

    @classmethod
    def of(cls, cfg: RunConfig, prompt_tokens: int) -> "JobLayout":
        """The layout of ``cfg``'s job with prompts of ``prompt_tokens``: the completion budget is the
        longest think budget, the phrase and the answer budget (the answer alone with thinking off);
        PipelineRL's generators are placed as the run places them (``rlscale.gpus.generator_gpus``: the GPUs
        after the trainer ranks', round robin; a lone trainer's own GPU when there is none; or one per generator task,
        ``launcher.generator_tasks``); activation checkpointing as ``engine.activation_checkpointing`` sets it,
        ``auto`` as off (``checkpointing_needed`` resolves it for a GPU); the learners' head chunk; the generator's
        rows as ``engine.generator_rows`` sets them, ``auto`` as None (``generator_rows`` resolves it for a GPU);
        ValueError for a shape that leaves them no GPU."""
        gen, launcher = cfg.generation, cfg.launcher
        think = cfg.length.longest_think(gen.max_think_tokens)
        completion = (think + PHRASE_TOKENS if gen.think is not False else 0) + gen.max_answer_tokens + 1
        pipeline = cfg.offpolicy.name == "pipeline"
        generators = cfg.offpolicy.num_generators if pipeline else 0
        prompts, generations = cfg.batch.prompts, cfg.batch.generations
        chunk = -(-prompts // generators) if generators else prompts
        if launcher.generator_tasks:  # one generator per task of its own, on its task's GPU
            per_gpu = 1 if pipeline else 0
        else:
            placed = Counter(generator_gpus(launcher.tasks_per_node, launcher.gpus_per_node, generators))
            per_gpu = max(placed.values()) if placed and min(placed) >= launcher.tasks_per_node else 0
        return cls(BYTES[cfg.model.dtype], cfg.precision.lm_head_fp32, cfg.engine.learner, cfg.engine.zero_stage,
                   launcher.nodes * launcher.tasks_per_node - launcher.generator_tasks, prompts * generations,
                   chunk * generations, cfg.batch.micro_batch, prompt_tokens + completion, generators, per_gpu,
                   cfg.engine.activation_checkpointing is True, HEAD_CHUNK_TOKENS,
                   None if cfg.engine.generator_rows == "auto" else cfg.engine.generator_rows,
                   cfg.offpolicy.slots if pipeline else 0, pipeline and launcher.generator_tasks > 0,
                   cfg.engine.generator == "torch")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU by part: ``trainer`` is rank 0's (the largest: the synchronous loop samples there),
    ``generator`` the busiest PipelineRL generator GPU's (None when the generators share the trainer's GPU or
    there are none)."""

    trainer: Dict[str, float]
    generator: Optional[Dict[str, float]]

    @property
    def trainer_gib(self) -> float:
        return sum(self.trainer.values()) / GIB

    @property
    def generator_gib(self) -> Optional[float]:
        return None if self.generator is None else sum(self.generator.values()) / GIB

    @classmethod
    def of(cls, shape: ModelShape, job: JobLayout) -> "MemoryEstimate":
        p, b = shape.params, job.weight_bytes
        zero = job.learner == "deepspeed" and job.ranks > 1
        split = job.ranks if zero else 1
        states = 8 * p + p * b + (8 * p if b < 4 else 0)
        rank_rows = -(-job.rows // job.ranks)
        tokens = (job.micro_batch if 0 < job.micro_batch < rank_rows else rank_rows) * job.sequence
        head_bytes = 4 if job.fp32_head else b
        head_tokens = min(tokens, job.head_chunk) if job.head_chunk > 0 else tokens
        layer = tokens * (6 * shape.hidden + 2 * shape.kv_width + 2 * shape.intermediate) * b  # one layer's
        kv_cache = job.cache_rows * row_cache_bytes(shape, job)
        zero3 = job.learner == "deepspeed" and job.zero_stage >= 3
        trainer = {
            "weights": p * b / (split if zero and zero3 else 1),
            **({"whole_weights": p * b} if zero3 else {}),
            "optimizer": states / split,
            "activations": tokens * shape.layers * shape.hidden * b + layer if job.checkpointing
            else shape.layers * layer,
            "lm_head": head_tokens * shape.vocab * 2 * head_bytes,
        }
        fused = shape.fused_params * b if job.decoder_copies else 0
        copies = lambda n: {"decoder_copies": n * fused} if fused else {}  # noqa: E731  (n generators' fused copies)
        published = {"published_weights": job.published * p * b} if job.generators else {}
        if job.generators and job.per_gpu:  # rank 0's own generator keeps its fused copies too
            own = {"weights": job.per_gpu * p * b, **copies(job.per_gpu), "kv_cache": job.per_gpu * kv_cache}
            if job.generator_tasks:  # each generator task keeps the published versions beside its model
                return cls({**trainer, **copies(1)}, {**own, "published_weights": job.per_gpu * job.published * p * b})
            return cls({**trainer, **copies(1), **published}, own)
        shared = {"generator_weights": job.generators * p * b} if job.generators else {}
        return cls({**trainer, **shared, **copies(1 + job.generators), **published,
                    "kv_cache": max(1, job.generators) * kv_cache}, None)


def checkpointing_needed(shape: ModelShape, job: JobLayout, device_bytes: int) -> bool:
    """``engine.activation_checkpointing=auto`` on a trainer GPU of ``device_bytes``: whether this estimate of the
    trainer GPU without activation checkpointing (``job`` otherwise as it is) passes ``USABLE_FRACTION`` of it."""
    without = MemoryEstimate.of(shape, replace(job, checkpointing=False))
    return sum(without.trainer.values()) > USABLE_FRACTION * device_bytes


# what lowers each part of the trainer GPU's estimate, as the refusal of a job that does not fit names it
TRAINER_FIXES = {
    "activations": "set engine.activation_checkpointing=true or lower batch.micro_batch",
    "optimizer": "spread it over more trainer ranks (engine.learner=deepspeed, launcher.tasks_per_node)",
    "published_weights": "set offpolicy.update_every_tokens=0 (one published version) or lower offpolicy.max_lag",
    "kv_cache": "lower engine.generator_rows",
    "lm_head": "lower batch.micro_batch",
    "whole_weights": "use engine.zero_stage=2 with more GPU memory per rank",
}


def check_trainer_fits(shape: ModelShape, job: JobLayout, device_bytes: int) -> None:
    """Refuse, in one line naming the fields to change for its two largest parts, a job whose trainer GPU (rank 0's)
    passes ``USABLE_FRACTION`` of ``device_bytes`` by this estimate."""
    parts = MemoryEstimate.of(shape, job).trainer
    total = sum(parts.values())
    if total <= USABLE_FRACTION * device_bytes:
        return
    largest = sorted((p for p in parts if p in TRAINER_FIXES), key=lambda p: -parts[p])[:2]
    fixes = "; ".join(f"{p.replace('_', ' ')} {parts[p] / GIB:.3g} GiB: {TRAINER_FIXES[p]}" for p in largest)
    raise ValueError(f"the trainer GPU needs {total / GIB:.3g} GiB by the memory estimate, past "
                     f"{USABLE_FRACTION:.0%} of its {device_bytes / GIB:.3g} GiB ({fixes})")


def row_cache_bytes(shape: ModelShape, job: JobLayout) -> int:
    """KV cache of one generator row at the job's longest sequence: sequence x 2 L k b."""
    return job.sequence * 2 * shape.layers * shape.kv_width * job.weight_bytes


def generator_rows(shape: ModelShape, job: JobLayout, device_bytes: int) -> int:
    """``engine.generator_rows`` resolved on GPUs of ``device_bytes`` (the one that holds the generators'
    caches: a generator GPU of its own, else the trainer's): ``job.generator_rows`` when the estimate fits
    ``USABLE_FRACTION`` of it (0: every row of a chunk); for auto (None) 0 when every row fits, else the most
    rows that fit, a multiple of 8 from 8 on. ValueError naming the field to change when it does not fit."""
    estimate = MemoryEstimate.of(shape, job)
    where = "generator" if estimate.generator is not None else "trainer"
    per_row = (job.per_gpu if estimate.generator is not None else max(1, job.generators)) * row_cache_bytes(shape, job)
    rest = sum((estimate.generator or estimate.trainer).values()) - job.cache_rows * per_row
    room = USABLE_FRACTION * device_bytes - rest
    fit = int(room // per_row) if room > 0 else 0
    card = f"{USABLE_FRACTION:.0%} of the {where} GPU's {device_bytes / GIB:.3g} GiB"
    if fit < 1:
        raise ValueError(f"field 'engine.generator_rows': not even one generator row of {job.sequence} tokens "
                         f"fits {card}: the rest of the estimate is {rest / GIB:.3g} GiB (lower batch.micro_batch, "
                         f"set engine.activation_checkpointing=true, or spread the job over more GPUs)")
    if job.generator_rows is None:
        return 0 if fit >= job.chunk_rows else (fit // 8 * 8 if fit >= 8 else fit)
    if job.cache_rows > fit:
        raise ValueError(f"field 'engine.generator_rows': {job.cache_rows} rows of {job.sequence} tokens need "
                         f"{(rest + job.cache_rows * per_row) / GIB:.3g} GiB on the {where} GPU, past {card}; "
                         f"at most {fit} fit (engine.generator_rows={fit}, or auto)")
    return job.generator_rows
