"""The learner's log-prob pass: selected log-probs without a log-softmax tensor, no attention mask, and
torch.compile.

``SelectedLogprobs`` must give log_softmax's values and gradients (hand-derived reference: autograd
through ``torch.log_softmax``); ``token_logprobs`` passes no attention mask (right-padded rows: causal
attention alone hides the padding), and a ``TorchLearner`` with ``compiled`` wraps it in ``torch.compile``
(the CUDA default, ``engine.compile``). Both must leave the numbers of real tokens unchanged: checked
against HF's masked forward, and a compiled learner's updates against the eager learner's, on CPU
(inductor's C++ backend), including a second batch of another width (the recompile with a dynamic
sequence length).
"""
from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from torch._dynamo.callback import callback_handler

from rlscale.config.schema import BatchConfig, OptimConfig, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.core.types import TrainBatch
from rlscale.train.components import learner_settings_of
from rlscale.engines.learners.torch_learner import TorchLearner, length_bucket
from rlscale.engines.models.policy import SelectedLogprobs, token_logprobs
from rlscale.engines.models.tiny_model import build_tiny_llama
from synthetic_batches import off_policy_batch

VOCAB = 96


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_tiny_llama(TinyModelConfig(), VOCAB).eval()


def right_padded_batch(model, lengths: list[int], seed: int) -> TrainBatch:
    """Rows of the given lengths, completion = everything after 3 prompt tokens, rewards +1/-1 in groups
    of two."""
    n = len(lengths)
    return off_policy_batch(model, lengths, prompt_len=3, vocab=VOCAB, seed=seed, noise=0.2,
                            rewards=[1.0, -1.0] * (n // 2), groups=[row // 2 for row in range(n)])


@pytest.mark.parametrize("dtype,temperature,tol", [(torch.float32, 1.0, 1e-6), (torch.float32, 0.7, 1e-6),
                                                   (torch.bfloat16, 1.0, 1e-6), (torch.bfloat16, 0.7, 1e-6)])
def test_selected_logprobs_match_log_softmax_values_and_gradients(dtype, temperature, tol):
    gen = torch.Generator().manual_seed(4)
    x = (4 * torch.randn(3, 5, 50, generator=gen)).to(dtype)
    target = torch.randint(0, 50, (3, 5), generator=gen)
    g = torch.randn(3, 5, generator=gen)
    mine = x.clone().requires_grad_(True)
    logp, lse = SelectedLogprobs.apply(mine, target, 1.0 / temperature)
    (logp * g).sum().backward()
    ref_x = x.clone().requires_grad_(True)
    z = ref_x.float() / temperature
    ref = torch.log_softmax(z, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
    (ref * g).sum().backward()
    torch.testing.assert_close(logp, ref.detach(), rtol=0, atol=tol * 10)
    torch.testing.assert_close(lse, torch.logsumexp(z.detach(), -1), rtol=0, atol=tol * 10)
    assert mine.grad.dtype == dtype
    # bf16 gradients: the same float32 values, rounded once to bf16
    torch.testing.assert_close(mine.grad, ref_x.grad, rtol=0 if dtype == torch.float32 else 8e-3, atol=tol)


def test_unmasked_logprobs_equal_the_masked_forward_on_real_tokens():
    model = tiny_model()
    batch = right_padded_batch(model, [9, 5, 12, 7], seed=1)
    with torch.no_grad():
        ours = token_logprobs(model, batch.input_ids, True).logp
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float()
        theirs = torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    real = batch.attention_mask[:, 1:].bool()
    assert real.sum() == 9 + 5 + 12 + 7 - 4
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fp32_head,temperature", [(True, 1.0), (True, 0.7), (False, 0.7)])
def test_entropy_is_that_of_the_tempered_softmax(fp32_head, temperature):
    """H = -sum p log p of softmax(logits / T), the logits from the head in its precision (the bf16 head's
    reference rounds fp32 logits, hence its looser tolerance)."""
    model = tiny_model()
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours = token_logprobs(model, ids, fp32_head, temperature, with_entropy=True)
        logits = model(input_ids=ids).logits[:, :-1]
        logits = logits.float() if fp32_head else logits.to(torch.bfloat16).float()
        logp = torch.log_softmax(logits / temperature, -1)
    theirs = -(logp.exp() * logp).sum(-1)
    torch.testing.assert_close(ours.entropy, theirs, rtol=1e-5, atol=1e-5 if fp32_head else 5e-2)


@pytest.mark.parametrize("long_sequence", [False, True], ids=["plain", "checkpointed-chunked-head"])
def test_compiled_learner_updates_like_the_eager_learner(long_sequence):
    """Also: whatever the widths of later batches, it compiles at the first update and at most once more,
    one decoder layer at the first new width, after which every width is served (a recompile of the whole
    model mid-run stalls a GPU run for a minute or more). So too with checkpointed layers and the head in
    chunks of 20 positions (the compiled layers and head run again in the backward; micro-batches of 62 to
    190 positions leave a shorter last chunk), against the plain eager learner."""
    eager_model = tiny_model()
    compiled_model = copy.deepcopy(eager_model)
    cfg = RunConfig(optim=OptimConfig(lr=1e-3, warmup_steps=1, weight_decay=0.0), batch=BatchConfig(micro_batch=2))
    eager = TorchLearner(learner_settings_of(cfg), eager_model)
    settings = learner_settings_of(cfg, compiled=True, checkpointing=long_sequence)
    compiled = TorchLearner(replace(settings, head_chunk=20) if long_sequence else settings, compiled_model)
    compilations: list = []
    callback_handler.register_start_callback(compilations.append)
    widths, counts = [], []
    for seed, lengths in ((2, [9, 5, 12, 7]), (3, [6, 14, 40, 10]), (4, [40, 3, 70, 9])):  # 3 buckets
        batch = right_padded_batch(eager_model, lengths, seed)
        widths.append(length_bucket(batch.input_ids.shape[1]))
        advantages = batch.rewards.clone()
        weights = batch.mask / batch.mask.sum()
        a = eager.step(batch, advantages, weights)
        b = compiled.step(batch, advantages, weights)
        counts.append(len(compilations))
        assert a.loss != 0.0
        assert abs(a.loss - b.loss) <= 1e-5 * max(1.0, abs(a.loss))
        assert abs(a.grad_norm - b.grad_norm) <= 1e-4 * a.grad_norm
        assert abs(a.entropy - b.entropy) <= 1e-4 * a.entropy
    callback_handler.remove_start_callback(compilations.append)
    assert widths == [32, 64, 96] and counts[0] >= 1 and counts[1] - counts[0] <= 1 and counts[2] == counts[1]
    moved = 0.0
    for (name, p), q, p0 in zip(eager_model.named_parameters(), compiled_model.parameters(),
                                tiny_model().parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
        moved = max(moved, float((p - p0).detach().abs().max()))
    assert moved > 1e-4  # the two steps did change the weights


def test_the_layers_of_a_compiled_learner_share_one_graph():
    """Compiled by regions, a deeper model compiles no more graphs than a shallow one: Dynamo traces one
    decoder layer for all of them (a warm second run of a 30-layer model traces one layer, not 30)."""
    settings = learner_settings_of(RunConfig(optim=OptimConfig(lr=1e-3, warmup_steps=1, weight_decay=0.0)),
                                   compiled=True, max_width=32)
    counts = []
    for layers in (2, 6):
        torch._dynamo.reset()  # a fresh process's compile state
        torch.manual_seed(0)
        model = build_tiny_llama(TinyModelConfig(num_layers=layers), VOCAB).eval()
        eager = copy.deepcopy(model)
        learner = TorchLearner(settings, model)
        batch = right_padded_batch(model, [9, 5, 12, 7], 2)
        compilations: list = []
        callback_handler.register_start_callback(compilations.append)
        result = learner.step(batch, batch.rewards.clone(), batch.mask / batch.mask.sum())
        callback_handler.remove_start_callback(compilations.append)
        counts.append(len(compilations))
        with torch.no_grad():
            ids = batch.padded(32).input_ids
            torch.testing.assert_close(learner.logprobs(eager, ids, True).logp, token_logprobs(eager, ids, True).logp,
                                       rtol=1e-5, atol=1e-5)
        assert result.loss != 0.0
    assert counts[0] >= 2 and counts[1] == counts[0]
