"""The plain torch learner: AdamW with linear warm-up then a constant lr (Section 2: lr 5e-7, eps 1e-15,
weight decay 0.01, 100 warm-up steps; scaled here by config), gradient accumulation over micro-batches
with the batch's global aggregation weights, gradient clipping.

Advantages and aggregation weights are computed once over the whole batch by the caller, so the sum
of the micro-batch losses is exactly the full-batch loss (Section 3.2 aggregation is not changed by
gradient accumulation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from rlscale.config.schema import OptimConfig
from rlscale.engines.policy import token_logprobs
from rlscale.rl import LossInputs, LossSpec, policy_loss
from rlscale.train.batch import TrainBatch


@dataclass
class StepResult:
    loss: float
    grad_norm: float
    clip_fraction: float
    ratio_mean: float
    entropy: float
    kl: Optional[float]
    trained_tokens: int


def build_optimizer(model, cfg: OptimConfig):
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                            weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))
    return opt, sched


class TorchLearner:
    def __init__(self, model, optim_cfg: OptimConfig, loss_spec: LossSpec, fp32_head: bool, temperature: float,
                 micro_batch: int = 0, ref_model=None):
        self.model = model
        self.cfg = optim_cfg
        self.loss_spec = loss_spec
        self.fp32_head = fp32_head
        self.temperature = temperature
        self.micro_batch = micro_batch
        self.ref_model = ref_model
        self.optimizer, self.scheduler = build_optimizer(model, optim_cfg)

    def _micro_batches(self, n: int):
        size = self.micro_batch if self.micro_batch > 0 else n
        return [torch.arange(i, min(n, i + size)) for i in range(0, n, size)]

    @torch.no_grad()
    def _logprobs_of(self, model, batch: TrainBatch) -> torch.Tensor:
        return token_logprobs(model, batch.input_ids, batch.attention_mask, self.fp32_head, self.temperature).logp

    def step(self, batch: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor) -> StepResult:
        """One optimizer update on ``batch`` with global ``weights`` [N, L-1] (loss = sum W * per_token)."""
        self.model.train()
        total_loss = 0.0
        clip = ratio = entropy = kl = 0.0
        kl_seen = False
        tokens_in_loss = float(batch.mask.sum())
        self.optimizer.zero_grad(set_to_none=True)
        for rows in self._micro_batches(batch.num_sequences):
            mb = batch.rows(rows)
            prox = self._logprobs_of(self.model, mb) if self.loss_spec.tis_cap is not None else None
            ref = self._logprobs_of(self.ref_model, mb) if self.ref_model is not None else None
            out_lp = token_logprobs(self.model, mb.input_ids, mb.attention_mask, self.fp32_head, self.temperature,
                                    with_entropy=True)
            out = policy_loss(LossInputs(logp=out_lp.logp, gen_logp=mb.gen_logp, advantages=advantages[rows],
                                         mask=mb.mask, prox_logp=prox, ref_logp=ref), self.loss_spec)
            loss = (weights[rows] * out.per_token).sum()
            loss.backward()
            total_loss += loss.item()
            share = float(mb.mask.sum()) / max(tokens_in_loss, 1.0)
            clip += float(out.clip_fraction) * share
            ratio += float(out.ratio_mean) * share
            entropy += float((out_lp.entropy * mb.mask).sum()) / max(tokens_in_loss, 1.0)
            if out.kl is not None:
                kl += float(out.kl) * share
                kl_seen = True
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        if torch.isfinite(grad_norm) and tokens_in_loss > 0:
            self.optimizer.step()
        self.scheduler.step()
        self.model.eval()
        return StepResult(loss=total_loss, grad_norm=float(grad_norm), clip_fraction=clip, ratio_mean=ratio,
                          entropy=entropy, kl=kl if kl_seen else None,
                          trained_tokens=int(batch.attention_mask.sum()))

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
