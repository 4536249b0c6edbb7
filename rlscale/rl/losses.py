"""Policy losses by name: grpo, dapo, gspo, cispo (ScaleRL Section 3.2, "Loss type").

Every loss returns a loss per token, [N, T]; turning it into one scalar is the job of
``rlscale.rl.aggregation`` (kept apart so that any loss combines with any aggregation).

The importance ratio is taken against the GENERATOR's log-prob of the sampled token (Section 3.2):
rho_it = pi_train(y_it) / pi_gen(y_it) = exp(logp - gen_logp). Shapes: N sequences, T token positions
(right-padded); ``mask`` is 1 on the completion tokens that enter the loss, 0 elsewhere (prompt,
padding, filtered-out sequences). Values at mask = 0 are never read: they may be anything finite or
not, and get neither loss nor gradient.

- grpo / dapo: PPO-clip, -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A). The two differ only in
  the clip range the config gives them (GRPO 0.2/0.2; DAPO's asymmetric "clip-higher" 0.2/0.28,
  Section 3.2).
- gspo: the same PPO-clip form on the sequence ratio s_i = exp(mean_t (logp - gen_logp)), the
  geometric mean of the token ratios (GSPO, Zheng et al. 2025). Tokens use GSPO-token's
  s_it = sg(s_i) * pi(y_it) / sg(pi(y_it)): its value is s_i, its gradient flows through each token's
  log-prob. With sample aggregation this is exactly GSPO's sequence objective. The paper's working
  clip scale is eps ~ 4e-3.
- cispo: -sg(min(rho, cispo_cap)) A log pi(y_it) (MiniMax-M1's CISPO, ScaleRL's choice): the ratio is
  truncated from above at cispo_cap (the ratio itself, e.g. 4, not 1 + eps) and carries no gradient;
  the gradient flows only through log pi. There is no lower clip (lower bound 0) and no eps to set.
- a loss of one's own: ``loss.name=module:attribute`` naming a function of the shape ``PolicyLoss``
  (docs/extending.md); the corrections below apply to it too.

Each loss has a config class of its own, the annotation of its ``spec`` argument: ``CispoConfig``, ``ClipConfig``
(grpo), ``DapoConfig``, ``GspoConfig``, or a plug-in's own subclass of ``LossConfig``. The run's ``loss`` section
is typed by it when the config is composed, so a knob of another loss (``loss.eps_high`` with cispo) or a value out
of its bounds is refused there, in one line (``rlscale.config.compose``). ``LOSSES`` is the table of the built-in
names; the registry reads it (``rlscale.config.registry.LOSS``), and the learner resolves the run's loss once
(``rlscale.engines.learners.build``) and hands it to ``policy_loss``.

Corrections applied on top of any loss, per token:
- ``tis_cap``: truncated importance sampling (TIS) for the trainer/generator mismatch, as Yao et al. 2025
  ("Your efficient RL framework secretly brings you off-policy RL training") and verl define it. With
  ``prox_logp`` = log pi_old, the learner's own log-prob of the batch under the weights before this update
  (no gradient), the loss's ratio is taken against the learner's old policy, rho = pi_train / pi_old, and
  the per-token loss is multiplied by w = sg(min(pi_old / pi_gen, tis_cap)). The generator's probability
  thus enters once, through w, never twice. Without ``prox_logp`` the correction is skipped and rho is
  taken against pi_gen as above.
- ``kl_coef`` > 0: + kl_coef * k3, k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1 (Schulman's
  unbiased, non-negative estimator of KL(pi || pi_ref)). The paper uses no KL term (Section 2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Protocol

import torch
from torch import Tensor

from rlscale.knobs import knob

LOSS_NAME = "the loss (``loss=NAME``, or ``loss.name=MODULE:FUNCTION`` for a loss of one's own)"


@dataclass
class LossConfig:
    """The policy loss; rho = pi_train / pi_generator_old per token (GSPO: per sequence). Every loss takes these
    knobs (the corrections applied on top of it); a plug-in loss's config class subclasses this one with its own."""

    name: str = knob("cispo", LOSS_NAME, "Sec. 3.2")
    tis_cap: Optional[float] = knob(None, "truncated importance sampling weight min(pi_train_old / pi_gen, cap) "
                                    "against the trainer/generator mismatch (null = off)", gt=0)
    kl_coef: float = knob(0.0, "weight of a k3 KL term to the initial policy (the paper uses none)", "Sec. 2", ge=0)


@dataclass
class CispoConfig(LossConfig):
    """CISPO's cap on the importance ratio (ScaleRL's loss, Sec. 3.2)."""

    cispo_cap: float = knob(4.0, "the cap on the importance ratio itself, sg(min(rho, cispo_cap)) (eps_max of the "
                            "paper and of MiniMax-M1; 4, 5 and 8 did equally well)", "Sec. 3.2", gt=0)


@dataclass
class ClipConfig(LossConfig):
    """PPO-clip's range [1 - eps_low, 1 + eps_high], GRPO's symmetric 0.2 by default (Sec. 3.2)."""

    name: str = knob("grpo", LOSS_NAME, "Sec. 3.2")
    eps_low: float = knob(0.2, "rho >= 1 - eps_low", "Sec. 3.2", ge=0, lt=1)
    eps_high: float = knob(0.2, "rho <= 1 + eps_high", "Sec. 3.2", gt=0)


@dataclass
class DapoConfig(ClipConfig):
    """DAPO's asymmetric "clip-higher" range [1 - 0.2, 1 + 0.28] (the Section-2 baseline)."""

    name: str = knob("dapo", LOSS_NAME, "Sec. 3.2")
    eps_high: float = knob(0.28, "rho <= 1 + eps_high (DAPO's clip-higher)", "Sec. 3.2", gt=0)


@dataclass
class GspoConfig(ClipConfig):
    """GSPO's clip on the sequence ratio, at the paper's working scale eps ~ 4e-3 (1e-4 did not work)."""

    name: str = knob("gspo", LOSS_NAME, "Sec. 3.2")
    eps_low: float = knob(4e-3, "s >= 1 - eps_low on the sequence ratio s", "Sec. 3.2", ge=0, lt=1)
    eps_high: float = knob(4e-3, "s <= 1 + eps_high on the sequence ratio s", "Sec. 3.2", gt=0)


@dataclass(frozen=True)
class LossInputs:
    """One (micro-)batch of N sequences, T token positions.

    logp:       [N, T] current policy log-prob of each sampled token (requires grad).
    gen_logp:   [N, T] the generator's log-prob of that token, recorded at sampling time.
    advantages: [N] one advantage per sequence (``rlscale.rl.advantages``).
    mask:       [N, T] float, 1 = completion token in the loss, 0 = not.
    prox_logp:  [N, T] or None, the learner's log-prob under the weights before this update (no grad),
                pi_old of ``tis_cap``.
    ref_logp:   [N, T] or None, the reference policy's log-prob, for the KL term.
    """

    logp: Tensor
    gen_logp: Tensor
    advantages: Tensor
    mask: Tensor
    prox_logp: Optional[Tensor] = None
    ref_logp: Optional[Tensor] = None

    def __post_init__(self) -> None:
        shape = self.logp.shape
        if self.logp.dim() != 2:
            raise ValueError(f"logp must be [N, T], got shape {tuple(shape)}")
        for name in ("gen_logp", "mask", "prox_logp", "ref_logp"):
            value = getattr(self, name)
            if value is not None and value.shape != shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, logp has {tuple(shape)}")
        if self.advantages.shape != shape[:1]:
            raise ValueError(f"advantages must be [N] = [{shape[0]}], got {tuple(self.advantages.shape)}")


@dataclass(frozen=True)
class LossOutputs:
    """per_token:     [N, T] loss per token before aggregation, 0 where mask = 0.
    clip_fraction: [] fraction of masked tokens whose ratio is clipped (no gradient through it).
    ratio_mean:    [] mean over masked tokens of the ratio the loss uses (gspo: the sequence ratio).
    kl:            [] mean over masked tokens of k3, when ``ref_logp`` is given; else None.
    The three diagnostics are detached means over this (micro-)batch's masked tokens."""

    per_token: Tensor
    clip_fraction: Tensor
    ratio_mean: Tensor
    kl: Optional[Tensor] = None


@dataclass(frozen=True)
class LossTokens:
    """What every loss reads, with positions outside the mask neutralised (log-probs 0, ratio 1).

    logp:       [N, T] current policy log-prob of each sampled token (requires grad).
    log_ratio:  [N, T] logp minus the log-prob the ratio is taken against (the generator's, or pi_old's
                under ``tis_cap``).
    advantages: [N, 1] one advantage per sequence.
    mask:       [N, T] float, 1 = completion token in the loss.
    """

    logp: Tensor
    log_ratio: Tensor
    advantages: Tensor
    mask: Tensor


@dataclass(frozen=True)
class PolicyTerm:
    """What a loss returns. loss: [N, T] its policy-gradient term per token (masked, corrected and aggregated
    by the caller); ratio: [N, T] the ratio it uses, detached (``ratio_mean``); clipped: [N, T] bool, where its
    clip is active (``clip_fraction``)."""

    loss: Tensor
    ratio: Tensor
    clipped: Tensor


class PolicyLoss(Protocol):
    """A loss of ``loss.name`` (Sec. 3.2): one of ``LOSSES``, or a plug-in ``module:attribute`` naming a function
    of this shape, whose ``spec`` annotation names its config class (a ``LossConfig``). ``policy_loss`` applies the
    TIS and KL corrections, the mask and the diagnostics around it."""

    def __call__(self, tokens: LossTokens, spec: LossConfig) -> PolicyTerm:
        ...


def _ppo_clip(ratio: Tensor, advantages: Tensor, spec: ClipConfig) -> PolicyTerm:
    """-min(ratio A, clip(ratio, 1 - eps_low, 1 + eps_high) A); clipped where the second term wins."""
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - spec.eps_low, 1.0 + spec.eps_high) * advantages
    return PolicyTerm(loss=-torch.minimum(unclipped, clipped), ratio=ratio.detach(), clipped=clipped < unclipped)


def grpo(tokens: LossTokens, spec: ClipConfig) -> PolicyTerm:
    """PPO-clip with GRPO's symmetric clip [1 - 0.2, 1 + 0.2] (Sec. 3.2)"""
    return _ppo_clip(tokens.log_ratio.exp(), tokens.advantages, spec)


def dapo(tokens: LossTokens, spec: DapoConfig) -> PolicyTerm:
    """PPO-clip with DAPO's asymmetric clip [1 - eps_low, 1 + eps_high] (Section-2 baseline)"""
    return grpo(tokens, spec)


def sequence_log_ratio(log_ratio: Tensor, mask: Tensor) -> Tensor:
    """[N, T] token log-ratios -> [N] mean over each sequence's masked tokens (log of GSPO's s_i, the
    geometric mean of the token ratios); 0 for a sequence with no masked token."""
    return (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def gspo(tokens: LossTokens, spec: GspoConfig) -> PolicyTerm:
    """PPO-clip on the sequence ratio, the geometric mean of the token ratios, eps ~4e-3 (Sec. 3.2)"""
    seq = sequence_log_ratio(tokens.log_ratio, tokens.mask).detach().unsqueeze(-1)
    return _ppo_clip((seq + tokens.logp - tokens.logp.detach()).exp(), tokens.advantages, spec)


def cispo(tokens: LossTokens, spec: CispoConfig) -> PolicyTerm:
    """-sg(min(rho, cispo_cap)) A log pi: truncated IS weight, gradient through log pi (ScaleRL, Sec. 3.2)"""
    ratio = tokens.log_ratio.detach().exp()
    weight = ratio.clamp(max=spec.cispo_cap)
    return PolicyTerm(loss=-weight * tokens.advantages * tokens.logp, ratio=ratio, clipped=ratio > spec.cispo_cap)


LOSSES: Dict[str, PolicyLoss] = {"cispo": cispo, "dapo": dapo, "grpo": grpo, "gspo": gspo}
"""The built-in losses by name; each one's docstring is its line in ``--help`` and the reference."""


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def truncated_is_weight(prox_logp: Tensor, gen_logp: Tensor, cap: float) -> Tensor:
    """[N, T] sg(min(pi_old / pi_gen, cap)): the truncated importance weight correcting for the
    trainer/generator mismatch (no gradient); ``prox_logp`` is the learner's log pi_old."""
    return (prox_logp - gen_logp).detach().exp().clamp(max=cap)


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """[N, T] k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1 (>= 0)."""
    delta = ref_logp - logp
    return delta.exp() - delta - 1.0


def policy_loss(inp: LossInputs, loss: PolicyLoss, spec: LossConfig) -> LossOutputs:
    """The loss per token of ``loss`` (the ``PolicyLoss`` of ``spec.name``, resolved once by the learner's
    builder) with its ``spec`` and the optional TIS and KL corrections (module docstring).

    Aggregate with ``(aggregation_weights(...) * out.per_token).sum()``.
    """
    valid = inp.mask > 0
    logp = torch.where(valid, inp.logp, 0.0)
    gen_logp = torch.where(valid, inp.gen_logp, 0.0)
    tis = spec.tis_cap is not None and inp.prox_logp is not None
    old_logp = torch.where(valid, inp.prox_logp, 0.0) if tis else gen_logp
    tokens = LossTokens(logp=logp, log_ratio=logp - old_logp, advantages=inp.advantages.unsqueeze(-1),
                        mask=inp.mask)
    term = loss(tokens, spec)
    per_token = term.loss
    if tis:
        per_token = per_token * truncated_is_weight(old_logp, gen_logp, spec.tis_cap)
    if spec.kl_coef > 0 and inp.ref_logp is None:
        raise ValueError("kl_coef > 0 needs ref_logp")
    kl = None
    if inp.ref_logp is not None:
        k3 = k3_kl(logp, torch.where(valid, inp.ref_logp, 0.0))
        kl = _masked_mean(k3.detach(), inp.mask)
        if spec.kl_coef > 0:
            per_token = per_token + spec.kl_coef * k3
    return LossOutputs(per_token=per_token * inp.mask,
                       clip_fraction=_masked_mean(term.clipped.to(inp.mask.dtype), inp.mask),
                       ratio_mean=_masked_mean(term.ratio, inp.mask), kl=kl)
