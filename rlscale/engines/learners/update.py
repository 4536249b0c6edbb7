"""What both learners share: the optimizer (Section 2: AdamW with linear warm-up then a constant lr)
and the loss of one micro-batch.

Advantages and aggregation weights are computed once over the whole batch by the caller, so the sum of
the micro-batch losses ``sum(W * per_token)`` is exactly the full-batch loss (Section 3.2 aggregation
does not change with gradient accumulation). The diagnostics of a micro-batch are weighted by its share
of the batch's loss tokens, so their sum over the micro-batches is the batch's token-weighted mean.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

from rlscale.config.schema import OptimConfig
from rlscale.core.types import TrainBatch
from rlscale.rl import LossInputs, PolicyLoss, policy_loss
from rlscale.rl.losses import LossConfig

# input_ids -> per-token log-probs [N, L-1] (and entropies, for the trained pass)
Scorer = Callable[[torch.Tensor], torch.Tensor]
TrainedPass = Callable[[torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]


def build_optimizer(model, cfg: OptimConfig, params=None, fused: bool = False):
    """AdamW over ``params`` (default: the model's) and the warm-up schedule; ``fused`` for CUDA tensors."""
    opt = torch.optim.AdamW(model.parameters() if params is None else params, lr=cfg.lr, betas=tuple(cfg.betas),
                            eps=cfg.eps, weight_decay=cfg.weight_decay, fused=fused or None)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))
    return opt, sched


def token_shares(batch: TrainBatch, parts) -> list[float]:
    """Each part's (rows of ``batch``) share of the batch's loss tokens."""
    tokens_in_loss = max(float(batch.mask.sum()), 1.0)
    return [float(batch.mask[rows].sum()) / tokens_in_loss for rows in parts]


@dataclass
class MicroLoss:
    """The micro-batch's part of the batch loss (to backpropagate) and its diagnostics [5] (float64):
    loss, clip fraction, ratio mean, entropy and KL, each already weighted by the micro-batch's share."""

    loss: torch.Tensor
    stats: torch.Tensor
    has_kl: bool


def micro_batch_loss(part: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor, policy: PolicyLoss,
                     spec: LossConfig, trained: TrainedPass, proximal: Scorer, reference: Optional[Scorer], share: float,
                     tokens_in_loss: float) -> MicroLoss:
    """The loss ``policy`` (with its config ``spec``) of the rows ``part`` with their ``advantages`` [n] and global
    ``weights`` [n, L-1]:
    the proximal policy's log-probs (the TIS denominator, only with ``spec.tis_cap``) and the reference's
    (only for a KL term) are scored before the trained pass, as both learners need."""
    prox = proximal(part.input_ids) if spec.tis_cap is not None else None
    ref = reference(part.input_ids) if reference is not None else None
    logp, entropy = trained(part.input_ids)
    out = policy_loss(LossInputs(logp=logp, gen_logp=part.gen_logp, advantages=advantages, mask=part.mask,
                                 prox_logp=prox, ref_logp=ref), policy, spec)
    loss = (weights * out.per_token).sum()
    kl = out.kl.detach() * share if out.kl is not None else torch.zeros((), device=loss.device)
    stats = torch.stack([loss.detach().double(), out.clip_fraction.detach().double() * share,
                         out.ratio_mean.detach().double() * share,
                         (entropy * part.mask).sum().double() / max(tokens_in_loss, 1.0), kl.double()])
    return MicroLoss(loss, stats, out.kl is not None)
