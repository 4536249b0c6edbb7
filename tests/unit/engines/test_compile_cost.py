"""Compilation is measured apart from the training compute and done once per shape bucket
(rlscale.engines.compile_cost, the learner's length buckets, the generator's decode buckets)."""
from __future__ import annotations

import os

import torch

from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.core.types import TrainBatch
from rlscale.engines.compile_cost import STALLS, StallClock, use_persistent_cache
from rlscale.engines.generators.graph_decode import KV_BLOCK, GraphDecoder, batch_bucket, bucket_slots
from rlscale.engines.generators.phases import PhaseRules
from rlscale.engines.learners.torch_learner import LENGTH_BLOCK, length_bucket
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.train.compute import ComputeMeter


def test_widths_map_to_a_bounded_set_of_learner_shapes():
    buckets = {length_bucket(w) for w in range(1, 1001)}
    assert buckets == set(range(LENGTH_BLOCK, 1024 + 1, LENGTH_BLOCK))  # 32 shapes for 1,000 widths
    assert all(0 <= length_bucket(w) - w < LENGTH_BLOCK for w in range(1, 1001))


def test_a_padded_batch_keeps_its_tokens_and_adds_only_masked_columns():
    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    batch = TrainBatch(ids, (ids > 0).long(), torch.tensor([[-1.0, -2.0], [-0.5, 0.0]]),
                       torch.tensor([[1.0, 1.0], [1.0, 0.0]]), torch.tensor([[0, 1], [0, -1]]),
                       torch.tensor([1.0, -1.0]), torch.tensor([0, 0]))
    wide = batch.padded(32)
    assert wide.input_ids.shape == (2, 32) and wide.mask.shape == (2, 31)
    assert torch.equal(wide.input_ids[:, :3], ids) and wide.attention_mask.sum() == batch.attention_mask.sum()
    assert wide.mask.sum() == batch.mask.sum() and torch.equal(wide.gen_logp[:, :2], batch.gen_logp)
    assert bool((wide.versions[:, 2:] == -1).all()) and batch.padded(3) is batch


def test_decode_buckets_grow_only_for_longer_prompts():
    steps = 48
    slots, seen = 0, []
    for width in (40, 31, 45, 12, 81, 70, 79, 20):
        slots = bucket_slots(width, steps, slots)
        seen.append(slots)
    assert seen == [128, 128, 128, 128, 192, 192, 192, 192]
    assert all(s % KV_BLOCK == 0 for s in seen)


def test_the_generator_keeps_one_decode_bucket_per_row_count_across_prompt_widths():
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()
    rules = PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=tok.think_close_ids,
                       interrupt_ids=tok.interrupt_ids, max_answer=4, interruption=False)
    engine = GraphDecoder(model, rules, True, 1.0, max_budget=8)
    made = []
    for question in ("1+2", "1+2+3+4+5+6+7+8+9+1+2+3+4+5+6+7+8+9+1+2+3+4+5+6+7+8+9+1+2+3+4+5+6+7+8+9+1", "7"):
        prompts = [tok.encode_prompt(question)] * 6
        engine.generate(prompts, torch.full((6,), 8), seed=1, version=0, version_hook=None, decode=tok.decode)
        made.append((list(engine.buckets), engine.buckets[batch_bucket(6), False].slots))
    assert [keys for keys, _ in made] == [[(8, False)]] * 3  # (rows, refilled)
    assert made[0][1] < made[1][1] == made[2][1]  # grown for the long prompt, kept for the short one


def test_nested_and_external_stalls_count_once():
    clock = StallClock()
    with clock.stall():
        clock.begin()  # a compilation inside a graph capture
        clock.end()
        with clock.stall():
            pass
    inside = clock.seconds
    clock.add(2.5)
    clock.end()  # an unmatched end changes nothing
    assert 0.0 <= inside < 2.5 and clock.seconds == inside + 2.5


def test_gpu_hours_exclude_compilation():
    meter = ComputeMeter(params=1, device_type="cuda", num_devices=4)
    with meter.measure():
        STALLS.add(3600.0)  # an hour of compiling inside a span of a few microseconds
    assert meter.totals.device_seconds == 0.0
    with meter.measure():
        pass
    assert 0.0 < meter.totals.device_seconds < 1.0


def test_the_compile_cache_lives_under_the_run_cache_dir(tmp_path, monkeypatch):
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    root = use_persistent_cache(tmp_path)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "compile" / "inductor") and root.parent == tmp_path
    monkeypatch.setenv("TRITON_CACHE_DIR", "/elsewhere")
    use_persistent_cache(tmp_path / "other")
    assert os.environ["TRITON_CACHE_DIR"] == "/elsewhere"


def test_a_run_with_a_known_longest_sequence_trains_on_one_shape():
    """The learner pads every batch to the run's longest prompt + completion (one compiled shape), and no
    sampled sequence is longer than that."""
    from rlscale.config import compose_run_config, typed
    from rlscale.engines.generators.torch_generator import TorchGenerator
    from rlscale.train.components import learner_settings_of
    from rlscale.engines.learners.torch_learner import TorchLearner
    from rlscale.train.components import build_task, longest_sequence

    cfg = typed(compose_run_config(["task.train_size=40"]))
    task = build_task(cfg)
    tok = CharTokenizer(cfg.length.phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(cfg.model, tok.vocab_size).eval()
    generator = TorchGenerator(model, tok, cfg.generation, cfg.length, True, torch.device("cpu"))
    longest = longest_sequence(task, tok, generator)
    prompts = [tok.encode_prompt(p.prompt) for p in task.train_problems()]
    assert longest == max(map(len, prompts)) + generator.max_new_tokens
    completions = generator.generate(prompts, torch.Generator().manual_seed(3))
    assert max(len(c.prompt_ids) + len(c.tokens) for c in completions) <= longest
    learner = TorchLearner(learner_settings_of(cfg, max_width=longest), model)
    assert {learner.padded_width(w) for w in range(1, longest + 1)} == {length_bucket(longest)}
