"""What the learners recompute for long sequences instead of keeping: activation checkpointing per decoder
layer (``engine.activation_checkpointing``, ``rlscale.engines.models.policy.checkpoint_layers``) and the LM head
over chunks of positions (``chunked_head_logprobs``).

Neither may change the numbers: the chunked head's log-probs, entropies and gradients are the whole head's, and
a torch learner with both makes the plain learner's updates, on the tiny model and on a random Qwen2 (tied head),
in float32 and with bf16 weights (the FP32 head on bf16 GEMMs). Both must lower the memory they exist for,
measured on CPU from torch's allocations (``rlscale.testing.cpu_memory``). Tolerances of the head: float32
values and gradients to 1e-6 relative (summation order only); a bf16 hidden state's gradient to one bf16
rounding (2^-8); the gradient of a bf16 weight (or of the bf16 head's GEMM) is rounded to bf16 once per chunk
before the chunks are summed, so it is held to one rounding per chunk, relative to its largest element. The DeepSpeed learner's counterpart is ``tests/integration/test_deepspeed_learner.py``.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from typing import List

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rlscale.config import ConfigError, compose_run_config
from rlscale.config.schema import BatchConfig, EngineConfig, OptimConfig, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.losses import CispoConfig
from rlscale.engines.learners.build import build_learner
from rlscale.train.components import auto_checkpointing, learner_settings_of
from rlscale.engines.models.policy import chunked_head_logprobs
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.testing.cpu_memory import peak_cpu_bytes
from synthetic_batches import off_policy_batch

VOCAB = 96
MIB = 2 ** 20


def leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


@pytest.mark.parametrize("dtype,fp32_head", [(torch.float32, True), (torch.bfloat16, True), (torch.bfloat16, False),
                                             (torch.float32, False)],
                         ids=["fp32-weights", "bf16-weights-fp32-head", "bf16-head", "fp32-weights-bf16-head"])
def test_the_chunked_head_gives_the_whole_heads_values_and_gradients(dtype, fp32_head):
    """2 rows x 23 positions in chunks of 7 (the last of 4), temperature 0.8, against the head on all 46."""
    gen = torch.Generator().manual_seed(0)
    weight = (0.3 * torch.randn(300, 16, generator=gen)).to(dtype)
    hidden = torch.randn(2, 23, 16, generator=gen).to(dtype)
    targets = torch.randint(0, 300, (2, 23), generator=gen)
    g = torch.randn(2, 23, generator=gen)
    results = []
    for chunk in (0, 7):
        w, h = leaf(weight), leaf(hidden)
        out = chunked_head_logprobs(w, h, targets, fp32_head, 1 / 0.8, True, chunk)
        (out.logp * g).sum().backward()
        results.append((out.logp.detach(), out.entropy, h.grad, w.grad))
    (logp, entropy, dh, dw), (c_logp, c_entropy, c_dh, c_dw) = results
    for whole, chunked in ((logp, c_logp), (entropy, c_entropy), (dh, c_dh)):
        assert chunked.dtype == whole.dtype
        rel = 1e-6 if whole.dtype == torch.float32 else 2 ** -8  # a bf16 hidden state's gradient: one rounding
        torch.testing.assert_close(chunked.float(), whole.float(), rtol=rel, atol=rel * float(whole.abs().max()))
    bf16_grad = fp32_head is False or dtype == torch.bfloat16  # a bf16 GEMM's output or a bf16 weight
    tol = 7 * 2 ** -8 if bf16_grad else 1e-6  # 7 chunks
    assert float((c_dw.float() - dw.float()).abs().max()) <= tol * float(dw.abs().max())


def test_the_head_in_chunks_holds_a_fraction_of_the_whole_heads_memory():
    """4,096 positions, a vocabulary of 8,192, the FP32 head, forward and backward. Measured on a 2-core AMD
    EPYC (torch 2.13): 416 MiB at once (the float32 logits and their gradient are 256 MiB), 29 MiB in chunks of
    256 positions."""
    gen = torch.Generator().manual_seed(0)
    positions, vocab = 4096, 8192
    weight = 0.1 * torch.randn(vocab, 64, generator=gen)
    hidden = torch.randn(positions, 64, generator=gen)
    targets = torch.randint(0, vocab, (positions,), generator=gen)
    peaks = {}
    for chunk in (0, 256):
        w, h = leaf(weight), leaf(hidden)
        peaks[chunk] = peak_cpu_bytes(lambda: chunked_head_logprobs(w, h, targets, True, 1.0, True, chunk)
                                      .logp.sum().backward())[1]
    logits_and_gradient = 2 * positions * vocab * 4
    assert peaks[0] >= logits_and_gradient
    assert peaks[256] < peaks[0] / 8, {k: v / MIB for k, v in peaks.items()}


def mlp_calls(model) -> List[int]:
    """A counter (its one element) of the calls of ``model``'s MLPs: each layer's forwards, a checkpointed
    layer's recompute in the backward among them."""
    calls = [0]
    for layer in model.model.layers:
        layer.mlp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def qwen2() -> torch.nn.Module:
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
                                        tie_word_embeddings=True))


MODELS = {"tiny": lambda: build_tiny_llama(TinyModelConfig(), VOCAB), "qwen2": qwen2}


@pytest.mark.parametrize("name,dtype", [("tiny", torch.float32), ("qwen2", torch.float32), ("tiny", torch.bfloat16)])
def test_a_checkpointed_learner_with_a_chunked_head_updates_like_the_plain_one(name, dtype):
    """Two updates (micro-batches of 2 rows, up to 22 positions, the head in chunks of 5), with TIS (the
    proximal pass) and a KL term (the reference's pass), both scored in chunks too. Statistics to 1e-5 relative
    in float32 (2e-2 with bf16 weights); weights to 1e-6 in float32; bf16 weights train through float32 masters,
    and a master that lands on the other side of a rounding boundary moves its bf16 weight one step of the bf16
    grid (here 1.6 % of them), so they are held to one step at the tensor's largest element."""
    torch.manual_seed(0)
    plain_model = MODELS[name]().to(dtype).eval()
    long_model, initial = copy.deepcopy(plain_model), copy.deepcopy(plain_model)
    cfg = RunConfig(optim=OptimConfig(lr=1e-3, eps=1e-3, warmup_steps=1, weight_decay=0.0),
                    loss=CispoConfig(tis_cap=2.0, kl_coef=0.05), batch=BatchConfig(micro_batch=2))
    plain = build_learner(replace(learner_settings_of(cfg), head_chunk=0), plain_model)
    long = build_learner(replace(learner_settings_of(cfg, checkpointing=True), head_chunk=5), long_model)
    batches = [off_policy_batch(plain_model, lengths, prompt_len=3, vocab=VOCAB, seed=seed, noise=0.2,
                                rewards=[1.0, -1.0, 1.0, -1.0], groups=[0, 0, 1, 1])
               for seed, lengths in ((1, [9, 5, 12, 7]), (2, [12, 10, 3, 8]))]
    plain_calls, long_calls = mlp_calls(plain_model), mlp_calls(long_model)
    rel = 1e-5 if dtype == torch.float32 else 2e-2
    for batch in batches:
        advantages, weights = batch.rewards.clone(), batch.mask / batch.mask.sum()
        a, b = plain.step(batch, advantages, weights), long.step(batch, advantages, weights)
        for key in ("loss", "grad_norm", "entropy", "kl", "ratio_mean"):
            assert getattr(b, key) == pytest.approx(getattr(a, key), rel=rel, abs=1e-7), key
    # per micro-batch and layer: the proximal pass, the trained pass, and (checkpointed) its recompute
    assert plain_calls[0] == 2 * 2 * 2 * 2 and long_calls[0] == 2 * 2 * 2 * 3
    moved = 0.0
    for (key, p), q, p0 in zip(plain_model.named_parameters(), long_model.parameters(), initial.parameters()):
        atol = 1e-6 if dtype == torch.float32 else 2 ** -7 * float(p.detach().abs().max())  # one bf16 step
        torch.testing.assert_close(q.float(), p.float(), rtol=0, atol=atol, msg=key)
        moved = max(moved, float((p - p0).detach().abs().max()))
    assert moved > 1e-3  # the updates did move the weights


def test_checkpointing_lowers_the_learners_peak():
    """One row of 1,024 tokens through 8 layers (hidden 64, MLP 256; activations dominate), the head whole:
    the peak of an update on a 2-core AMD EPYC (torch 2.13) is 55 MiB without checkpointing and 11 MiB with it,
    for the same loss."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
                                         intermediate_size=256, max_position_embeddings=1024)).eval()
    batch = off_policy_batch(model, [1024], prompt_len=3, vocab=64, seed=1, noise=0.2, rewards=[1.0], groups=[0])
    advantages, weights = torch.ones(1), batch.mask / batch.mask.sum()
    cfg = RunConfig(optim=OptimConfig(lr=1e-3, warmup_steps=1, weight_decay=0.0))
    peaks, losses = {}, {}
    for checkpointing in (False, True):
        learner = build_learner(replace(learner_settings_of(cfg, checkpointing=checkpointing), head_chunk=0),
                                copy.deepcopy(model))
        learner.step(batch, advantages, weights)  # the optimizer's moments exist from here on
        result, peaks[checkpointing] = peak_cpu_bytes(lambda: learner.step(batch, advantages, weights))
        losses[checkpointing] = result.loss
    assert losses[True] == pytest.approx(losses[False], rel=1e-6)
    assert peaks[True] < peaks[False] / 3, {k: v / MIB for k, v in peaks.items()}


def test_the_setting_is_validated_auto_is_off_on_cpu_and_the_learner_follows_the_config():
    assert compose_run_config(["engine.activation_checkpointing=true"]).engine.activation_checkpointing is True
    with pytest.raises(ConfigError, match="field 'engine.activation_checkpointing': must be true, false or auto, "
                                          "got 'always'"):
        compose_run_config(["engine.activation_checkpointing=always"])
    model = build_tiny_llama(TinyModelConfig(), VOCAB)
    for setting, expected in (("auto", False), (True, True), (False, False)):
        cfg = RunConfig(engine=EngineConfig(activation_checkpointing=setting))
        assert auto_checkpointing(cfg, model, 100, torch.device("cpu")) is expected
        assert learner_settings_of(cfg).checkpointing is expected
        assert learner_settings_of(cfg, checkpointing=True).checkpointing is True  # as resolved by the caller
