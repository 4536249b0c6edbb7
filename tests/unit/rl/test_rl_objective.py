"""The RL objective on one hand-worked batch: advantages x losses x aggregations.

The batch: 2 prompts x 3 generations, T = 4 positions, float64.

    seq  group  reward  |y|  token ratios rho = pi/pi_gen   current log-probs logp
    0    7       1      3    2.0  0.5   1.0                 -1.0 -2.0 -0.5
    1    7      -1      2    0.5  0.5                       -0.5 -1.0
    2    7      -1      4    2.0  0.5   1.21  1.21          -2.0 -1.0 -0.5 -1.5
    3    3       3      1    5.0                            -3.0
    4    3       0      3    1.25 0.64  1.25                -1.0 -0.5 -2.0
    5    3       0      2    2.0  0.72                      -1.5 -1.0

Group ids are 7 and 3 (unsorted, not 0-based). Positions past |y| are masked out; there logp = -7
and gen_logp = NaN, which must neither leak into the loss nor into the gradient.

Every expected number below is written out by hand; the comments show the arithmetic.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlscale.config.registry import NORMALIZATION
from rlscale.rl import (LossInputs, aggregation_weights, compute_advantages, policy_loss,
                        sequence_log_ratio)
from rlscale.rl.advantages import NORMALIZATIONS
from rlscale.rl.aggregation import AGGREGATIONS
from rlscale.rl.losses import LOSSES, CispoConfig, ClipConfig, DapoConfig, GspoConfig, LossConfig


def normalization_of(name: str, **knobs):
    """(function, config) of the normalization ``name``, with those of ``knobs`` its config has (none has no eps)."""
    klass = NORMALIZATION.config_class(name)
    own = {f.name for f in dataclasses.fields(klass)}
    return NORMALIZATIONS[name], klass(**{key: value for key, value in knobs.items() if key in own})


def loss_of(inp: LossInputs, spec: LossConfig):
    """The built-in loss of ``spec.name`` with its config, as the learner calls it."""
    return policy_loss(inp, LOSSES[spec.name], spec)

F64 = torch.float64
LENGTHS = [3, 2, 4, 1, 3, 2]
RHO = [[2.0, 0.5, 1.0], [0.5, 0.5], [2.0, 0.5, 1.21, 1.21], [5.0], [1.25, 0.64, 1.25], [2.0, 0.72]]
LOGP = [[-1.0, -2.0, -0.5], [-0.5, -1.0], [-2.0, -1.0, -0.5, -1.5], [-3.0], [-1.0, -0.5, -2.0],
        [-1.5, -1.0]]
REWARDS = [1.0, -1.0, -1.0, 3.0, 0.0, 0.0]
GROUP_IDS = [7, 7, 7, 3, 3, 3]


def padded(rows: list[list[float]], pad: float) -> torch.Tensor:
    return torch.tensor([row + [pad] * (4 - len(row)) for row in rows], dtype=F64)


def mask() -> torch.Tensor:
    return padded([[1.0] * n for n in LENGTHS], 0.0)


def group_ids() -> torch.Tensor:
    return torch.tensor(GROUP_IDS)


def logp_leaf() -> torch.Tensor:
    return padded(LOGP, -7.0).requires_grad_()


def gen_logp() -> torch.Tensor:
    """gen_logp = logp - ln(rho), so that exp(logp - gen_logp) = rho."""
    return padded([[lp - math.log(r) for lp, r in zip(lps, rs)] for lps, rs in zip(LOGP, RHO)], math.nan)


def inputs(advantages: torch.Tensor, logp: torch.Tensor, **extra) -> LossInputs:
    return LossInputs(logp=logp, gen_logp=gen_logp(), advantages=advantages, mask=mask(), **extra)


# ---------------------------------------------------------------------------------------------------
# Advantages, by hand.
# group 7: rewards (1, -1, -1), mean -1/3, centred (4/3, -2/3, -2/3),
#          population var (16/9 + 4/9 + 4/9) / 3 = 8/9, std 2*sqrt(2)/3.
# group 3: rewards (3, 0, 0), mean 1, centred (2, -1, -1), var (4 + 1 + 1) / 3 = 2, std sqrt(2).
# batch:   var of all centred (mean 0) = (16/9 + 4/9 + 4/9 + 4 + 1 + 1) / 6 = (78/9) / 6 = 13/9,
#          std sqrt(13)/3.
R2 = math.sqrt(2.0)
R13 = math.sqrt(13.0)
ADVANTAGES = {
    "none": [4 / 3, -2 / 3, -2 / 3, 2.0, -1.0, -1.0],
    # group 7: (4/3) / (2 sqrt2 / 3) = sqrt2, (-2/3) / (2 sqrt2 / 3) = -1/sqrt2;
    # group 3: 2 / sqrt2 = sqrt2, -1 / sqrt2.
    "group": [R2, -1 / R2, -1 / R2, R2, -1 / R2, -1 / R2],
    # centred * 3 / sqrt13.
    "batch": [4 / R13, -2 / R13, -2 / R13, 6 / R13, -3 / R13, -3 / R13],
}


@pytest.mark.parametrize("normalization", sorted(ADVANTAGES))
def test_advantages_table(normalization):
    got = compute_advantages(torch.tensor(REWARDS, dtype=F64), group_ids(),
                             *normalization_of(normalization, eps=0.0))
    torch.testing.assert_close(got, torch.tensor(ADVANTAGES[normalization], dtype=F64))


def test_advantages_default_eps_and_order_independence():
    # The eps default shifts the values by ~1e-6 relative only.
    got = compute_advantages(torch.tensor(REWARDS, dtype=F64), group_ids(), *normalization_of("group"))
    torch.testing.assert_close(got, torch.tensor(ADVANTAGES["group"], dtype=F64), rtol=2e-6, atol=0)
    # Interleaving the groups permutes the advantages the same way.
    perm = torch.tensor([3, 0, 4, 1, 5, 2])
    got = compute_advantages(torch.tensor(REWARDS, dtype=F64)[perm], group_ids()[perm],
                             *normalization_of("batch", eps=0.0))
    torch.testing.assert_close(got, torch.tensor(ADVANTAGES["batch"], dtype=F64)[perm])


def test_zero_variance_group_gets_zero_advantage_not_nan():
    # group 0 rewards (1, 1): centred (0, 0), std 0, 0 / (0 + eps) = 0. group 1 rewards (1, -1):
    # centred (1, -1), std 1, so (1, -1) / (1 + 1e-6).
    got = compute_advantages(torch.tensor([1.0, 1.0, 1.0, -1.0]), torch.tensor([0, 0, 1, 1]),
                             *normalization_of("group"))
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, 1.0, -1.0]), rtol=1e-5, atol=0)


def test_unknown_normalization_is_rejected():
    with pytest.raises(ValueError, match="normalization.name"):
        NORMALIZATION.load("prompt")


# ---------------------------------------------------------------------------------------------------
# Aggregation weights, by hand: one weight per sequence, the same on each of its masked tokens.
# token:  1 / (3 + 2 + 4 + 1 + 3 + 2) = 1/15.
# sample: 1 / (6 |y_i|): 1/18, 1/12, 1/24, 1/6, 1/18, 1/12.
# prompt: group 7 has 3 + 2 + 4 = 9 tokens, group 3 has 1 + 3 + 2 = 6, 2 groups:
#         1 / (2 * 9) = 1/18 for group 7, 1 / (2 * 6) = 1/12 for group 3.
SEQ_WEIGHTS = {
    "token": [1 / 15] * 6,
    "sample": [1 / 18, 1 / 12, 1 / 24, 1 / 6, 1 / 18, 1 / 12],
    "prompt": [1 / 18, 1 / 18, 1 / 18, 1 / 12, 1 / 12, 1 / 12],
}


def weights_table(per_sequence: list[float]) -> torch.Tensor:
    return padded([[w] * n for w, n in zip(per_sequence, LENGTHS)], 0.0)


@pytest.mark.parametrize("mode", sorted(SEQ_WEIGHTS))
def test_aggregation_weights_table(mode):
    got = aggregation_weights(mask(), group_ids(), AGGREGATIONS[mode])
    torch.testing.assert_close(got, weights_table(SEQ_WEIGHTS[mode]))


@pytest.mark.parametrize("mode, expected", [
    # seq 3 (group 3) filtered out: 14 tokens left; 5 sequences left; group 3 has 3 + 2 = 5 tokens.
    ("token", [1 / 14, 1 / 14, 1 / 14, 0.0, 1 / 14, 1 / 14]),
    ("sample", [1 / 15, 1 / 10, 1 / 20, 0.0, 1 / 15, 1 / 10]),  # 1 / (5 |y_i|)
    ("prompt", [1 / 18, 1 / 18, 1 / 18, 0.0, 1 / 10, 1 / 10]),  # 1 / (2 * 9), 1 / (2 * 5)
])
def test_aggregation_ignores_an_empty_sequence(mode, expected):
    m = mask()
    m[3] = 0.0
    got = aggregation_weights(m, group_ids(), AGGREGATIONS[mode])
    expected_table = weights_table(expected)
    expected_table[3] = 0.0
    torch.testing.assert_close(got, expected_table)


@pytest.mark.parametrize("mode, expected", [
    ("token", [1 / 9] * 3),                 # 9 tokens left
    ("sample", [1 / 9, 1 / 6, 1 / 12]),     # 1 / (3 |y_i|)
    ("prompt", [1 / 9] * 3),                # one group left: 1 / (1 * 9)
])
def test_aggregation_ignores_an_empty_group(mode, expected):
    m = mask()
    m[3:] = 0.0
    got = aggregation_weights(m, group_ids(), AGGREGATIONS[mode])
    torch.testing.assert_close(got, weights_table(expected + [0.0] * 3))


@pytest.mark.parametrize("mode", sorted(SEQ_WEIGHTS))
def test_aggregation_of_an_empty_batch_is_zero(mode):
    got = aggregation_weights(torch.zeros(3, 4), torch.tensor([0, 0, 1]), AGGREGATIONS[mode])
    assert torch.equal(got, torch.zeros(3, 4))


# ---------------------------------------------------------------------------------------------------
# Per-token losses, by hand. Every advantage above has the sign pattern (+, -, -, +, -, -), and the
# normalizations only rescale it, so per_token = -A_i * C_it with a coefficient table C per loss.
#
# PPO-clip, -min(rho A, clip(rho) A): for A > 0 the coefficient is min(rho, 1 + eps_high), for A < 0
# it is max(rho, 1 - eps_low). grpo (0.2, 0.2); * marks a clipped token:
#   seq 0 (+): min(2.0, 1.2) = 1.2*, 0.5, 1.0
#   seq 1 (-): max(0.5, 0.8) = 0.8*, 0.8*
#   seq 2 (-): 2.0, max(0.5, 0.8) = 0.8*, 1.21, 1.21
#   seq 3 (+): min(5.0, 1.2) = 1.2*
#   seq 4 (-): 1.25, max(0.64, 0.8) = 0.8*, 1.25
#   seq 5 (-): 2.0, max(0.72, 0.8) = 0.8*
# -> 7 of 15 tokens clipped. dapo (0.2, 0.28): the two A > 0 clips become 1.28; still 7 clipped.
# gspo (eps_low 0.3, eps_high 0.1): s_i = geometric mean of the row's rho:
#   seq 0: (2 * 0.5 * 1)^(1/3) = 1          (+) min(1, 1.1) = 1
#   seq 1: (0.5 * 0.5)^(1/2) = 0.5          (-) max(0.5, 0.7) = 0.7*
#   seq 2: (2 * 0.5 * 1.21 * 1.21)^(1/4) = (1.1^4)^(1/4) = 1.1   (-) max(1.1, 0.7) = 1.1
#   seq 3: 5                                (+) min(5, 1.1) = 1.1*
#   seq 4: (1.25 * 0.64 * 1.25)^(1/3) = 1^(1/3) = 1   (-) 1
#   seq 5: (2 * 0.72)^(1/2) = 1.44^(1/2) = 1.2        (-) 1.2
# -> 2 + 1 = 3 of 15 tokens clipped.
# cispo (cispo_cap 4; its eps_low / eps_high are unused): C = min(rho, 4) * logp:
#   seq 0: 2 * -1 = -2, 0.5 * -2 = -1, 1 * -0.5 = -0.5
#   seq 1: 0.5 * -0.5 = -0.25, 0.5 * -1 = -0.5
#   seq 2: 2 * -2 = -4, 0.5 * -1 = -0.5, 1.21 * -0.5 = -0.605, 1.21 * -1.5 = -1.815
#   seq 3: min(5, 4) = 4 (clipped) * -3 = -12
#   seq 4: 1.25 * -1 = -1.25, 0.64 * -0.5 = -0.32, 1.25 * -2 = -2.5
#   seq 5: 2 * -1.5 = -3, 0.72 * -1 = -0.72
# -> 1 of 15 tokens clipped.
SPECS = {
    "grpo": ClipConfig("grpo", eps_low=0.2, eps_high=0.2),
    "dapo": DapoConfig("dapo", eps_low=0.2, eps_high=0.28),
    "gspo": GspoConfig("gspo", eps_low=0.3, eps_high=0.1),
    "cispo": CispoConfig("cispo", cispo_cap=4.0),
}
COEFFICIENTS = {
    "grpo": [[1.2, 0.5, 1.0], [0.8, 0.8], [2.0, 0.8, 1.21, 1.21], [1.2], [1.25, 0.8, 1.25], [2.0, 0.8]],
    "dapo": [[1.28, 0.5, 1.0], [0.8, 0.8], [2.0, 0.8, 1.21, 1.21], [1.28], [1.25, 0.8, 1.25], [2.0, 0.8]],
    "gspo": [[1.0] * 3, [0.7] * 2, [1.1] * 4, [1.1], [1.0] * 3, [1.2] * 2],
    "cispo": [[-2.0, -1.0, -0.5], [-0.25, -0.5], [-4.0, -0.5, -0.605, -1.815], [-12.0],
              [-1.25, -0.32, -2.5], [-3.0, -0.72]],
}
# Ratio mean over the 15 tokens. Token ratios: 3.5 + 1.0 + 4.92 + 5.0 + 3.14 + 2.72 = 20.28 -> 1.352.
# gspo's sequence ratios, token-weighted: 3*1 + 2*0.5 + 4*1.1 + 1*5 + 3*1 + 2*1.2 = 18.8 -> 18.8/15.
DIAGNOSTICS = {  # clip_fraction, ratio_mean
    "grpo": (7 / 15, 1.352), "dapo": (7 / 15, 1.352), "gspo": (3 / 15, 18.8 / 15), "cispo": (1 / 15, 1.352),
}


@pytest.mark.parametrize("loss", sorted(SPECS))
def test_per_token_loss_table(loss):
    adv = ADVANTAGES["none"]
    out = loss_of(inputs(torch.tensor(adv, dtype=F64), logp_leaf()), SPECS[loss])
    expected = padded([[-a * c for c in row] for a, row in zip(adv, COEFFICIENTS[loss])], 0.0)
    torch.testing.assert_close(out.per_token, expected)
    clip_fraction, ratio_mean = DIAGNOSTICS[loss]
    assert out.clip_fraction.item() == pytest.approx(clip_fraction)
    assert out.ratio_mean.item() == pytest.approx(ratio_mean)
    assert out.kl is None


# Row sums of C (the per-sequence weights are constant along each row):
#   grpo:  2.7, 1.6, 5.22, 1.2, 3.3, 2.8
#   dapo:  2.78, 1.6, 5.22, 1.28, 3.3, 2.8
#   gspo:  3.0, 1.4, 4.4, 1.1, 3.0, 2.4
#   cispo: -3.5, -0.75, -6.92, -12.0, -4.07, -3.72
ROW_SUMS = {
    "grpo": [2.7, 1.6, 5.22, 1.2, 3.3, 2.8],
    "dapo": [2.78, 1.6, 5.22, 1.28, 3.3, 2.8],
    "gspo": [3.0, 1.4, 4.4, 1.1, 3.0, 2.4],
    "cispo": [-3.5, -0.75, -6.92, -12.0, -4.07, -3.72],
}


def objective(loss: str, mode: str, normalization: str, logp: torch.Tensor) -> torch.Tensor:
    adv = compute_advantages(torch.tensor(REWARDS, dtype=F64), group_ids(),
                             *normalization_of(normalization, eps=0.0))
    weights = aggregation_weights(mask(), group_ids(), AGGREGATIONS[mode])
    return (weights * loss_of(inputs(adv, logp), SPECS[loss]).per_token).sum()


@pytest.mark.parametrize("normalization", sorted(ADVANTAGES))
@pytest.mark.parametrize("mode", sorted(SEQ_WEIGHTS))
@pytest.mark.parametrize("loss", sorted(SPECS))
def test_every_combination(loss, mode, normalization):
    # loss = sum_i w_i * (-A_i) * rowsum_i, from the three hand tables.
    expected = -sum(w * a * s for w, a, s in zip(SEQ_WEIGHTS[mode], ADVANTAGES[normalization], ROW_SUMS[loss]))
    assert objective(loss, mode, normalization, logp_leaf()).item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("loss, mode, normalization, expected", [
    # ScaleRL: cispo, prompt, batch. A = k (4, -2, -2, 6, -3, -3), k = 1/sqrt13.
    #   group 7: -(1/18) k (4 * -3.5 - 2 * -0.75 - 2 * -6.92) = -(1/18) k (-14 + 1.5 + 13.84) = -1.34k/18
    #   group 3: -(1/12) k (6 * -12 - 3 * -4.07 - 3 * -3.72) = -(1/12) k (-72 + 12.21 + 11.16) = 48.63k/12
    #   (-0.0744444 + 4.0525) / 3.6055513 = 1.1033141
    ("cispo", "prompt", "batch", 1.1033140986),
    # grpo, sample, group. A = (1/sqrt2) (2, -1, -1, 2, -1, -1).
    #   -(1/sqrt2) (2*2.7/18 - 1.6/12 - 5.22/24 + 2*1.2/6 - 3.3/18 - 2.8/12)
    #   = -(1/sqrt2) (0.3 - 0.1333333 - 0.2175 + 0.4 - 0.1833333 - 0.2333333) = 0.0675/sqrt2 = 0.0477297
    ("grpo", "sample", "group", 0.0477297077),
    # dapo, token, none. -(1/15) (4/3 * 2.78 - 2/3 * 1.6 - 2/3 * 5.22 + 2 * 1.28 - 3.3 - 2.8)
    #   = -(1/15) (3.7066667 - 1.0666667 - 3.48 + 2.56 - 3.3 - 2.8) = 4.38/15 = 0.292
    ("dapo", "token", "none", 0.292),
    # gspo, prompt, batch. group 7: -(1/18) k (4*3 - 2*1.4 - 2*4.4) = -0.4k/18;
    #   group 3: -(1/12) k (6*1.1 - 3*3 - 3*2.4) = 9.6k/12 = 0.8k. (0.8 - 0.0222222) / 3.6055513 = 0.2157167
    ("gspo", "prompt", "batch", 0.2157167430),
])
def test_end_to_end_scalars(loss, mode, normalization, expected):
    assert objective(loss, mode, normalization, logp_leaf()).item() == pytest.approx(expected, abs=1e-9)


# ---------------------------------------------------------------------------------------------------
# Gradients, by hand: d loss / d logp_it with loss = sum W * per_token, A = "none", W = prompt.
def gradient(loss: str) -> tuple[torch.Tensor, torch.Tensor]:
    logp = logp_leaf()
    gen = gen_logp().requires_grad_()
    adv = torch.tensor(ADVANTAGES["none"], dtype=F64)
    weights = weights_table(SEQ_WEIGHTS["prompt"])
    inp = LossInputs(logp=logp, gen_logp=gen, advantages=adv, mask=mask())
    (weights * loss_of(inp, SPECS[loss]).per_token).sum().backward()
    return logp.grad, gen.grad


def expected_gradient(per_token_factor: list[list[float]]) -> torch.Tensor:
    """-W_it * A_i * factor_it."""
    adv = ADVANTAGES["none"]
    w = SEQ_WEIGHTS["prompt"]
    return padded([[-w[i] * adv[i] * f for f in row] for i, row in enumerate(per_token_factor)], 0.0)


def test_cispo_gradient_flows_only_through_logp():
    # d/dlogp [-sg(min(rho, 4)) A logp] = -min(rho, 4) A: the token's truncated ratio, never the
    # derivative of the ratio itself (which would add -rho A logp). seq 3: min(5, 4) = 4.
    logp_grad, gen_grad = gradient("cispo")
    torch.testing.assert_close(logp_grad, expected_gradient(
        [[2.0, 0.5, 1.0], [0.5, 0.5], [2.0, 0.5, 1.21, 1.21], [4.0], [1.25, 0.64, 1.25], [2.0, 0.72]]))
    assert gen_grad is None or torch.count_nonzero(gen_grad) == 0


def test_ppo_clipping_zeroes_the_gradient_of_clipped_tokens():
    # Unclipped: d/dlogp [-rho A] = -rho A. Clipped (the * of the grpo table): 0.
    logp_grad, _ = gradient("grpo")
    torch.testing.assert_close(logp_grad, expected_gradient(
        [[0.0, 0.5, 1.0], [0.0, 0.0], [2.0, 0.0, 1.21, 1.21], [0.0], [1.25, 0.0, 1.25], [2.0, 0.0]]))


def test_gspo_gradient_is_per_token_with_the_sequence_ratio():
    # s_it = sg(s_i) exp(logp - sg(logp)): d/dlogp_it [-s_it A] = -s_i A; clipped sequences 1, 3: 0.
    logp_grad, _ = gradient("gspo")
    torch.testing.assert_close(logp_grad, expected_gradient(
        [[1.0] * 3, [0.0] * 2, [1.1] * 4, [0.0], [1.0] * 3, [1.2] * 2]))


def test_gspo_sequence_ratio_is_the_geometric_mean():
    log_ratio = torch.where(mask() > 0, logp_leaf().detach() - gen_logp(), 0.0)
    # Geometric means worked out above the COEFFICIENTS table.
    torch.testing.assert_close(sequence_log_ratio(log_ratio, mask()).exp(),
                               torch.tensor([1.0, 0.5, 1.1, 5.0, 1.0, 1.2], dtype=F64))


@pytest.mark.parametrize("mode", sorted(SEQ_WEIGHTS))
@pytest.mark.parametrize("loss", sorted(SPECS))
def test_gradient_accumulation_does_not_change_loss_or_gradient(loss, mode):
    adv = compute_advantages(torch.tensor(REWARDS, dtype=F64), group_ids(), *normalization_of("batch"))
    weights = aggregation_weights(mask(), group_ids(), AGGREGATIONS[mode])  # once, over the whole batch
    whole_logp = logp_leaf()
    whole = (weights * loss_of(inputs(adv, whole_logp), SPECS[loss]).per_token).sum()
    whole.backward()

    micro_logp = logp_leaf()
    gen, m = gen_logp(), mask()
    accumulated = torch.zeros((), dtype=F64)
    for part in (slice(0, 2), slice(2, 6)):  # 2 + 4 sequences; splits group 7
        inp = LossInputs(logp=micro_logp[part], gen_logp=gen[part], advantages=adv[part], mask=m[part])
        micro = (weights[part] * loss_of(inp, SPECS[loss]).per_token).sum()
        micro.backward()
        accumulated = accumulated + micro.detach()
    torch.testing.assert_close(accumulated, whole.detach())
    torch.testing.assert_close(micro_logp.grad, whole_logp.grad)


# ---------------------------------------------------------------------------------------------------
# Corrections: truncated importance sampling and the KL term.
def test_truncated_importance_sampling_hand_computed():
    """TIS (Yao et al. 2025; verl): rho = pi / pi_old, loss * sg(min(pi_old / pi_gen, cap)); pi_gen enters once.

    One sequence of two tokens, cap 2, advantage A:
        pi_old = pi (the learner before its update)  0.5   0.2
        pi_gen                                       0.2   0.4
        w = min(pi_old / pi_gen, 2)                  min(2.5, 2) = 2   0.5
    cispo (cispo_cap 4), A = 1: rho = 1, loss = -1 * A * w * ln pi:
        -2 ln 0.5 = 1.3862944,  -0.5 ln 0.2 = 0.8047190;  d loss / d ln pi = -A w = -2, -0.5.
    grpo (0.2 / 0.2), A = -1: rho = 1 inside the clip range, loss = -rho A w = w = 2, 0.5;
        d loss / d ln pi = -A w rho = 2, 0.5.
    Measured against pi_gen instead (the ratio 2.5 times w, the factor counted twice) the cispo loss of the
    first token would be -min(2.5, 4) * 2 * ln 0.5 = 6.93."""
    pi, gen = torch.tensor([[0.5, 0.2]], dtype=F64), torch.tensor([[0.2, 0.4]], dtype=F64)
    ones = torch.ones(1, 2, dtype=F64)
    for name, eps_low, eps_high, adv, loss, grad in (
            ("cispo", 0.2, 0.28, 1.0, [-2 * math.log(0.5), -0.5 * math.log(0.2)], [-2.0, -0.5]),
            ("grpo", 0.2, 0.2, -1.0, [2.0, 0.5], [2.0, 0.5])):
        logp = pi.log().requires_grad_()
        out = loss_of(LossInputs(logp=logp, gen_logp=gen.log(), advantages=torch.tensor([adv], dtype=F64),
                                     mask=ones, prox_logp=pi.log()),
                          (CispoConfig(name, cispo_cap=4.0, tis_cap=2.0) if name == "cispo"
                           else ClipConfig(name, eps_low=eps_low, eps_high=eps_high, tis_cap=2.0)))
        torch.testing.assert_close(out.per_token, torch.tensor([loss], dtype=F64))
        out.per_token.sum().backward()
        torch.testing.assert_close(logp.grad, torch.tensor([grad], dtype=F64))
        assert out.ratio_mean.item() == pytest.approx(1.0)


def test_truncated_importance_sampling_off_leaves_the_loss_unchanged():
    """Without prox_logp, or with tis_cap None, rho is taken against pi_gen and no weight applies."""
    adv = torch.tensor(ADVANTAGES["none"], dtype=F64)
    spec = ClipConfig("grpo", eps_low=0.2, eps_high=0.2, tis_cap=2.0)
    plain = loss_of(inputs(adv, logp_leaf()), SPECS["grpo"]).per_token
    torch.testing.assert_close(loss_of(inputs(adv, logp_leaf()), spec).per_token, plain)
    torch.testing.assert_close(loss_of(inputs(adv, logp_leaf(), prox_logp=padded(LOGP, -7.0)),
                                           SPECS["grpo"]).per_token, plain)


def test_kl_term_value():
    # ref - logp = ln2 on seq 0, -ln2 on seq 1, 0 elsewhere. k3 = exp(d) - d - 1:
    #   d = ln2:  2 - 0.6931472 - 1 = 0.3068528;  d = -ln2: 0.5 + 0.6931472 - 1 = 0.1931472;  d = 0: 0.
    # mean over 15 tokens: (3 * 0.3068528 + 2 * 0.1931472) / 15 = 1.3068528 / 15 = 0.0871235.
    ln2 = math.log(2.0)
    delta = padded([[ln2] * 3, [-ln2] * 2, [0.0] * 4, [0.0], [0.0] * 3, [0.0] * 2], 0.0)
    ref = padded(LOGP, -7.0) + delta
    adv = torch.tensor(ADVANTAGES["none"], dtype=F64)
    spec = CispoConfig("cispo", cispo_cap=4.0, kl_coef=0.1)
    out = loss_of(inputs(adv, logp_leaf(), ref_logp=ref), spec)
    plain = loss_of(inputs(adv, logp_leaf()), SPECS["cispo"]).per_token
    added = padded([[0.1 * 0.3068528194] * 3, [0.1 * 0.1931471806] * 2, [0.0] * 4, [0.0], [0.0] * 3,
                    [0.0] * 2], 0.0)
    torch.testing.assert_close(out.per_token - plain.detach(), added)
    assert out.kl.item() == pytest.approx(0.0871235213)
    with pytest.raises(ValueError, match="ref_logp"):
        loss_of(inputs(adv, logp_leaf()), spec)


def test_shape_validation():
    with pytest.raises(ValueError, match="advantages"):
        LossInputs(logp=torch.zeros(2, 3), gen_logp=torch.zeros(2, 3), advantages=torch.zeros(3),
                   mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask"):
        LossInputs(logp=torch.zeros(2, 3), gen_logp=torch.zeros(2, 3), advantages=torch.zeros(2),
                   mask=torch.ones(2, 4))
