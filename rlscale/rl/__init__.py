"""Pure tensor math of the RL objective: advantages, policy losses, aggregation, filters, the
curriculum, length control. No I/O, no globals. Section numbers refer to ScaleRL (arXiv 2510.13786)."""
from rlscale.rl.advantages import compute_advantages
from rlscale.rl.aggregation import aggregation_weights
from rlscale.rl.curriculum import NoPositiveResamplingPool, PoolExhausted
from rlscale.rl.filters import select_groups_with_signal, zero_variance_keep
from rlscale.rl.groups import Groups
from rlscale.rl.length import dapo_length_penalty
from rlscale.rl.losses import (LossInputs, LossOutputs, LossTokens, PolicyLoss, PolicyTerm, k3_kl,
                               policy_loss, sequence_log_ratio, truncated_is_weight)

__all__ = [
    "Groups", "LossInputs", "LossOutputs", "LossTokens", "NoPositiveResamplingPool", "PolicyLoss",
    "PolicyTerm", "PoolExhausted",
    "aggregation_weights", "compute_advantages", "dapo_length_penalty", "k3_kl",
    "policy_loss", "select_groups_with_signal", "sequence_log_ratio", "truncated_is_weight",
    "zero_variance_keep",
]
