"""The torch learner with a bf16 policy (the GPU setting): fp32 master weights take updates far below
bf16's resolution (Section 2's lr is 5e-7), the bf16 weights are the masters rounded, micro-batching
accumulates the same fp32 gradient as one full batch, and the learner state carries the masters."""
from __future__ import annotations

import copy

import torch

from rlscale.config.schema import BatchConfig, OptimConfig, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.core.types import TrainBatch
from rlscale.train.components import learner_settings_of
from rlscale.engines.learners.torch_learner import TorchLearner
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.policy import token_logprobs
from rlscale.engines.models.tiny_model import build_tiny_llama


def bf16_policy() -> torch.nn.Module:
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    return build_tiny_llama(TinyModelConfig(), tok.vocab_size).to(torch.bfloat16).eval()


def on_policy_batch(model, rows: int = 4, length: int = 12) -> tuple[TrainBatch, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(6, 90, (rows, length), generator=gen)
    attn = torch.ones_like(ids)
    with torch.no_grad():
        gen_logp = token_logprobs(model, ids, True).logp.float()
    mask = torch.ones(rows, length - 1)
    batch = TrainBatch(ids, attn, gen_logp, mask, torch.zeros(rows, length - 1, dtype=torch.long),
                       torch.tensor([1.0, -1.0] * (rows // 2)), torch.arange(rows) // 2)
    advantages = torch.tensor([1.0, -1.0] * (rows // 2))
    return batch, advantages, mask / mask.sum()


def learner(model, lr: float, micro_batch: int = 0) -> TorchLearner:
    cfg = OptimConfig(lr=lr, warmup_steps=1, weight_decay=0.0)
    return TorchLearner(learner_settings_of(RunConfig(optim=cfg, batch=BatchConfig(micro_batch=micro_batch))), model)


def test_updates_below_bf16_resolution_accumulate_in_the_fp32_masters():
    model = bf16_policy()
    start = [p.detach().float().clone() for p in model.parameters()]
    learn = learner(model, lr=1e-5)
    assert learn.master is not None
    batch, adv, weights = on_policy_batch(model)
    for _ in range(3):
        learn.step(batch, adv, weights)
    moved = [(m.detach() - s).abs().max() for m, s in zip(learn.master.master, start)]
    assert max(moved) > 1e-5  # the masters moved ...
    for p, m in zip(model.parameters(), learn.master.master):  # ... and the policy is their bf16 rounding
        assert p.dtype == torch.bfloat16 and torch.equal(p, m.detach().to(torch.bfloat16))


def test_micro_batches_accumulate_the_full_batch_gradient_in_fp32():
    model = bf16_policy()
    batch, adv, weights = on_policy_batch(model)
    whole, parts = learner(copy.deepcopy(model), lr=0.0), learner(copy.deepcopy(model), lr=0.0, micro_batch=1)
    whole.step(batch, adv, weights)
    parts.step(batch, adv, weights)
    for a, b in zip(whole.master.master, parts.master.master):
        assert a.grad.dtype == torch.float32
        assert torch.allclose(a.grad, b.grad, atol=2e-3, rtol=5e-2)


def test_learner_state_restores_the_masters():
    model = bf16_policy()
    learn = learner(model, lr=1e-5)
    batch, adv, weights = on_policy_batch(model)
    learn.step(batch, adv, weights)
    state = copy.deepcopy(learn.state_dict())  # as a checkpoint on disk: no tensor shared with `learn`
    fresh_model = copy.deepcopy(model)
    fresh = learner(fresh_model, lr=1e-5)
    fresh.load_state_dict(state)
    for a, b in zip(learn.master.master, fresh.master.master):
        assert torch.equal(a.detach(), b.detach())
    learn.step(batch, adv, weights)
    fresh.step(batch, adv, weights)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh_model.parameters()))
