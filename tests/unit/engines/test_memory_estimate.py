"""The memory estimate per GPU (``rlscale.engines.memory``): parameters counted from a config equal the
instantiated model's; by hand, the ZeRO split, activation checkpointing, the LM head's chunks, the PipelineRL
placement, the copies of the weights that ZeRO-3's rank 0, the torch generator and PipelineRL's publication keep,
and the generator's refilled rows; what ``engine.generator_rows`` resolves to on a card, the completion budget
read from a composed run config, what ``auto`` checkpointing resolves to, and the estimate against peaks measured
on an H200."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from rlscale.config import compose_run_config, typed
from rlscale.engines.memory import (GIB, HEAD_CHUNK_TOKENS, PHRASE_TOKENS, USABLE_FRACTION, JobLayout,
                                   MemoryEstimate, ModelShape, check_trainer_fits, checkpointing_needed,
                                   generator_rows)
from rlscale.engines.models.shape import model_shape

SMALL = dict(vocab_size=300, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=96)


@pytest.mark.parametrize("config", [
    LlamaConfig(**SMALL, tie_word_embeddings=False),
    LlamaConfig(**SMALL, tie_word_embeddings=True),
    Qwen2Config(**SMALL, tie_word_embeddings=True),  # q/k/v biases
    Qwen3Config(**SMALL, head_dim=32, tie_word_embeddings=False),  # head size apart from hidden / heads, q/k norms
], ids=["llama", "llama-tied", "qwen2", "qwen3"])
def test_parameters_counted_from_the_config_equal_the_models(config):
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert ModelShape.of_config(config).params == sum(p.numel() for p in model.parameters())


def job(**changes) -> JobLayout:
    settings = dict(weight_bytes=2, fp32_head=True, learner="deepspeed", zero_stage=3, ranks=4, rows=64,
                    chunk_rows=64, micro_batch=4, sequence=100, generators=0, per_gpu=0, checkpointing=False,
                    head_chunk=0)
    return JobLayout(**{**settings, **changes})


SHAPE = ModelShape(params=1000, layers=2, hidden=8, kv_width=4, intermediate=16, vocab=50)


def test_zero_splits_states_over_the_ranks_and_stage_3_the_weights_too():
    zero3 = MemoryEstimate.of(SHAPE, job()).trainer
    assert zero3["weights"] == 2000 / 4
    assert zero3["whole_weights"] == 2000  # rank 0 keeps the model whole for its generator and the publication
    assert zero3["optimizer"] == (8000 + 2000 + 8000) / 4  # moments, bf16 gradients, fp32 masters + their grads
    assert zero3["activations"] == 4 * 100 * 2 * (6 * 8 + 2 * 4 + 2 * 16) * 2  # 4 of the rank's 16 rows
    assert zero3["lm_head"] == 400 * 50 * 2 * 4  # FP32 head: logits and their gradient in float32
    assert zero3["kv_cache"] == 64 * 100 * 2 * 2 * 4 * 2  # the synchronous loop samples every row on rank 0
    zero2 = MemoryEstimate.of(SHAPE, job(zero_stage=2)).trainer
    assert zero2["weights"] == 2000 and zero2["optimizer"] == zero3["optimizer"] and "whole_weights" not in zero2
    alone = MemoryEstimate.of(SHAPE, job(learner="torch", ranks=1, micro_batch=0, weight_bytes=4, fp32_head=False))
    assert alone.trainer["optimizer"] == 8000 + 4000  # float32: no master copy
    assert alone.trainer["activations"] == 64 * 100 * 2 * 88 * 4 and alone.trainer["lm_head"] == 6400 * 50 * 2 * 4


def test_checkpointing_keeps_each_layers_input_and_one_layer_and_the_head_one_chunk():
    plain = MemoryEstimate.of(SHAPE, job()).trainer
    long = MemoryEstimate.of(SHAPE, job(checkpointing=True, head_chunk=150)).trainer
    assert long["activations"] == 400 * 2 * 8 * 2 + 400 * 88 * 2  # 400 tokens: 2 layers' inputs, one layer's all
    assert plain["activations"] == 2 * 400 * 88 * 2
    assert long["lm_head"] == 150 * 50 * 2 * 4  # one chunk's float32 logits and gradient
    assert MemoryEstimate.of(SHAPE, job(head_chunk=1000)).trainer["lm_head"] == plain["lm_head"]  # one chunk
    assert {k: v for k, v in long.items() if k not in ("activations", "lm_head")} == \
        {k: v for k, v in plain.items() if k not in ("activations", "lm_head")}


def test_auto_checkpointing_turns_on_where_the_estimate_without_it_passes_nine_tenths_of_the_card():
    layout = job(checkpointing=True)  # auto judges the job without checkpointing, whatever the layout says
    without = sum(MemoryEstimate.of(SHAPE, job()).trainer.values())
    assert checkpointing_needed(SHAPE, layout, int(without / 0.9) - 1)
    assert not checkpointing_needed(SHAPE, layout, int(without / 0.9) + 1)


def test_pipeline_generators_hold_weights_and_cache_on_their_gpu_or_on_the_trainers():
    own = MemoryEstimate.of(SHAPE, job(generators=2, per_gpu=1, chunk_rows=32, published=1))
    assert own.generator == {"weights": 2000, "kv_cache": 32 * 100 * 2 * 2 * 4 * 2} and "kv_cache" not in own.trainer
    assert own.trainer["published_weights"] == 2000  # the newest version, on the trainer's GPU (CUDA IPC)
    shared = MemoryEstimate.of(SHAPE, job(generators=2, per_gpu=0, chunk_rows=32, published=1))
    assert shared.generator is None and shared.generator_gib is None
    assert shared.trainer["generator_weights"] == 4000 and shared.trainer["kv_cache"] == 2 * own.generator["kv_cache"]
    assert shared.trainer["published_weights"] == 2000
    doubled = MemoryEstimate.of(SHAPE, job(generators=4, per_gpu=2, chunk_rows=16))  # 4 generators on 2 GPUs
    assert doubled.generator == {"weights": 4000, "kv_cache": 2 * 16 * 100 * 2 * 2 * 4 * 2}


def test_scheduled_updates_keep_k_plus_one_published_versions_where_the_generators_read_them():
    """PipelineRL-8 with scheduled in-flight updates keeps 9 versions: on the trainer's GPU for generator processes,
    on each generator task's GPU beside its own model; the synchronous loop publishes nothing."""
    processes = MemoryEstimate.of(SHAPE, job(generators=2, per_gpu=1, chunk_rows=32, published=9))
    assert processes.trainer["published_weights"] == 9 * 2000 and "published_weights" not in processes.generator
    tasks = MemoryEstimate.of(SHAPE, job(generators=2, per_gpu=1, chunk_rows=32, published=9, generator_tasks=True))
    assert tasks.generator["published_weights"] == 9 * 2000 and tasks.generator["weights"] == 2000
    assert "published_weights" not in tasks.trainer
    assert "published_weights" not in MemoryEstimate.of(SHAPE, job(published=9)).trainer  # no generators


def test_torch_generators_keep_fused_q_k_v_and_gate_up_copies_in_every_process_that_samples():
    fused = 2 * 8 * (8 + 2 * 4 + 2 * 16) * 2  # layers x hidden x (q + 2 kv + 2 i) x bf16
    assert SHAPE.fused_params * 2 == fused
    alone = MemoryEstimate.of(SHAPE, job(decoder_copies=True))  # the synchronous loop: rank 0's generator
    assert alone.trainer["decoder_copies"] == fused
    shared = MemoryEstimate.of(SHAPE, job(generators=2, chunk_rows=32, decoder_copies=True))
    assert shared.trainer["decoder_copies"] == 3 * fused  # rank 0's and both generator processes'
    own = MemoryEstimate.of(SHAPE, job(generators=4, per_gpu=2, chunk_rows=16, decoder_copies=True))
    assert own.trainer["decoder_copies"] == fused and own.generator["decoder_copies"] == 2 * fused
    assert "decoder_copies" not in MemoryEstimate.of(SHAPE, job()).trainer  # vLLM: its own engine
    qwen3 = Qwen3Config(**SMALL, head_dim=32)  # q = 4 heads x 32, wider than the hidden size
    assert ModelShape.of_config(qwen3).fused_params == 3 * 64 * (128 + 2 * 64 + 2 * 96)


def test_the_generators_cache_follows_its_refilled_rows_not_the_chunks():
    row = 100 * 2 * 2 * 4 * 2  # sequence x 2 L k b
    assert MemoryEstimate.of(SHAPE, job(generator_rows=16)).trainer["kv_cache"] == 16 * row
    assert MemoryEstimate.of(SHAPE, job(generator_rows=100)).trainer["kv_cache"] == 64 * row  # a chunk has 64
    assert MemoryEstimate.of(SHAPE, job(generator_rows=None)).trainer["kv_cache"] == 64 * row  # auto: all, at most
    own = MemoryEstimate.of(SHAPE, job(generators=4, per_gpu=2, chunk_rows=16, generator_rows=4))
    assert own.generator["kv_cache"] == 2 * 4 * row


def test_generator_rows_resolve_to_what_fits_the_card_and_a_setting_past_it_is_refused():
    row = 100 * 2 * 2 * 4 * 2
    rest = sum(MemoryEstimate.of(SHAPE, job()).trainer.values()) - 64 * row
    card = lambda rows: int((rest + rows * row) / USABLE_FRACTION) + 1  # noqa: E731  (a card that holds ``rows``)
    assert generator_rows(SHAPE, job(generator_rows=None), card(64)) == 0  # every row fits: all at once
    assert generator_rows(SHAPE, job(generator_rows=None), card(63)) == 56  # the most that fit, a multiple of 8
    assert generator_rows(SHAPE, job(generator_rows=None), card(5)) == 5
    assert generator_rows(SHAPE, job(generator_rows=40), card(40)) == 40
    with pytest.raises(ValueError, match=r"field 'engine.generator_rows': 41 rows .* at most 40 fit"):
        generator_rows(SHAPE, job(generator_rows=41), card(40))
    with pytest.raises(ValueError, match=r"field 'engine.generator_rows': 64 rows"):
        generator_rows(SHAPE, job(), card(63))  # 0: the chunk's 64 rows
    with pytest.raises(ValueError, match="not even one generator row"):
        generator_rows(SHAPE, job(generator_rows=None), int(rest / USABLE_FRACTION))
    shared = job(generators=2, per_gpu=0, chunk_rows=32, generator_rows=None)  # 2 generators on the trainer's GPU
    rest2 = sum(MemoryEstimate.of(SHAPE, shared).trainer.values()) - 2 * 32 * row
    assert generator_rows(SHAPE, shared, int((rest2 + 2 * 20 * row) / USABLE_FRACTION) + 1) == 16  # 20 each fit


def test_a_trainer_gpu_past_the_card_is_refused_naming_what_lowers_its_largest_parts():
    wide = ModelShape(params=100_000, layers=2, hidden=8, kv_width=4, intermediate=16, vocab=50)
    layout = job(generators=2, per_gpu=1, chunk_rows=32, published=9, checkpointing=True)  # 9 versions on rank 0
    total = sum(MemoryEstimate.of(wide, layout).trainer.values())
    check_trainer_fits(wide, layout, int(total / USABLE_FRACTION) + 1)  # fits: nothing raised
    with pytest.raises(ValueError, match=r"the trainer GPU needs .* GiB .* past 90% of its .*\(published weights "
                                         r".*offpolicy.update_every_tokens=0.*; optimizer"):
        check_trainer_fits(wide, layout, int(total / USABLE_FRACTION) - 1)
    synchronous = job(fp32_head=False)  # the cache of every row and the activations on rank 0
    with pytest.raises(ValueError, match=r"\(kv cache .* GiB: lower engine.generator_rows; activations .*"
                                         r"engine.activation_checkpointing=true"):
        check_trainer_fits(SHAPE, synchronous, 1000)


def compose(overrides):
    return typed(compose_run_config(overrides))


def test_the_layout_of_a_composed_run_config():
    cfg = compose(["batch.prompts=16", "batch.generations=8", "batch.micro_batch=32", "length.window=[100,120]",
                   "generation.max_answer_tokens=30", "offpolicy=pipeline", "offpolicy.num_generators=2",
                   "engine.learner=deepspeed", "launcher.tasks_per_node=2", "launcher.gpus_per_node=4"])
    layout = JobLayout.of(cfg, prompt_tokens=200)
    assert layout.sequence == 200 + 120 + PHRASE_TOKENS + 30 + 1
    assert (layout.rows, layout.chunk_rows, layout.micro_batch) == (128, 64, 32)  # 2 generators, 8 prompts each
    assert (layout.ranks, layout.generators, layout.per_gpu) == (2, 2, 1)
    assert (layout.checkpointing, layout.head_chunk) == (False, HEAD_CHUNK_TOKENS)  # auto: off until a card is known
    assert JobLayout.of(compose(["engine.activation_checkpointing=true"]), 10).checkpointing
    assert layout.generator_rows is None and JobLayout.of(compose(["engine.generator_rows=24"]), 10).generator_rows == 24
    synchronous = JobLayout.of(compose(["offpolicy=ppo", "batch.prompts=16", "batch.generations=8"]), 10)
    assert synchronous.generators == 0 and synchronous.chunk_rows == 128
    tasks = JobLayout.of(compose(["batch.prompts=16", "batch.generations=8", "offpolicy=pipeline",
                                  "offpolicy.num_generators=8", "engine.learner=deepspeed", "launcher=slurm",
                                  "launcher.nodes=2", "launcher.tasks_per_node=8", "launcher.gpus_per_node=8",
                                  "launcher.generator_tasks=8"]), 10)
    assert (tasks.ranks, tasks.generators, tasks.per_gpu, tasks.chunk_rows) == (8, 8, 1, 16)  # a node of each
    assert (tasks.published, tasks.generator_tasks) == (3, True)  # k = 2 with scheduled updates: 3 versions
    assert (layout.published, layout.generator_tasks) == (3, False)
    assert JobLayout.of(compose(["offpolicy=pipeline", "offpolicy.update_every_tokens=0"]), 10).published == 1
    assert synchronous.published == 0
    assert layout.decoder_copies and not JobLayout.of(compose(["engine=vllm"]), 10).decoder_copies


def test_the_tiny_models_shape_is_its_own():
    cfg = compose([])
    assert model_shape(cfg.model).layers == cfg.model.num_layers
    with pytest.raises(ValueError, match="model.path"):
        model_shape(compose(["model=hf", "model.path=/nonexistent"]).model)


# Peaks of torch.cuda.max_memory_allocated over the RL step on one H200 (bench/results/gpu_bench-H200-fp32-head.md,
# 2026-11-28, c6e5351): 256 rows of 640 tokens, micro-batches of 32 rows, bf16 weights, one GPU; the learner then
# ran the head on whole micro-batches without checkpointing (``job``'s head_chunk 0, checkpointing off).
MEASURED_GIB = {("smollm2-135m", False): 17.22, ("smollm2-135m", True): 20.96,
                ("qwen2-0.5b", False): 32.23, ("qwen2-0.5b", True): 43.64}
BENCH_SHAPES = {"smollm2-135m": LlamaConfig(vocab_size=49152, hidden_size=576, num_hidden_layers=30,
                                            num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536,
                                            tie_word_embeddings=True),
                "qwen2-0.5b": Qwen2Config(vocab_size=151936, hidden_size=896, num_hidden_layers=24,
                                          num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
                                          tie_word_embeddings=True)}


@pytest.mark.parametrize("name,fp32_head", sorted(MEASURED_GIB))
def test_the_estimate_covers_the_measured_peak_within_a_fifth(name, fp32_head):
    layout = job(learner="torch", ranks=1, rows=256, chunk_rows=256, micro_batch=32, sequence=640,
                 fp32_head=fp32_head, decoder_copies=True)
    estimate = MemoryEstimate.of(ModelShape.of_config(BENCH_SHAPES[name]), layout).trainer_gib
    assert MEASURED_GIB[name, fp32_head] <= estimate <= 1.2 * MEASURED_GIB[name, fp32_head]
    assert estimate == pytest.approx(sum(MemoryEstimate.of(ModelShape.of_config(BENCH_SHAPES[name]), layout)
                                         .trainer.values()) / GIB)
