"""Two updates of a learner on fixed synthetic batches, for tests/integration/test_deepspeed_learner.py.

``--learner torch`` runs ``TorchLearner`` in one process (the reference); ``--learner deepspeed`` runs
``DeepSpeedLearner`` on every rank of a launch (``torchrun --nproc_per_node 2``, gloo on CPU), once per
``--zero-stage``: rank 0 drives it, the other ranks follow, as in the training loop. Both use the same
tiny Llama (fixed seed), the same batches (rows of different lengths, prompt groups of different sizes,
so the ranks' shards differ and micro-batching needs a ballast pass) with advantages and global
aggregation weights from ``rlscale.rl``. After update 1 the learner state is saved; update 2 is then made twice, the second time
after restoring the model and learner to their state after update 1 (a resume must give the same
weights). ``--long-sequence`` trains with activation checkpointing and the LM head in chunks of
``LONG_HEAD_CHUNK`` positions (several per micro-batch). The results and weights go to ``--out`` (deepspeed:
rank 0 writes {zero stage: ...}).
"""
from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import List

import torch

from rlscale.config.schema import BatchConfig, EngineConfig, GenerationConfig, OptimConfig, RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.core.types import TrainBatch
from rlscale.train.components import learner_settings_of
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.rl import aggregation_weights, compute_advantages
from rlscale.rl.advantages import StdConfig, by_batch
from rlscale.rl.aggregation import prompt_denominator
from rlscale.rl.losses import DapoConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared test helpers
from synthetic_batches import off_policy_batch  # noqa: E402

VOCAB = 48
GROUPS = [0, 0, 1, 1, 1]  # 5 rows over 2 ranks: shards of 3 and 2 rows
PROMPT = 4
LONG_HEAD_CHUNK = 5  # positions per pass of the head under --long-sequence: micro-batches hold up to 24


def run_config(zero_stage: int, long_sequence: bool = False) -> RunConfig:
    """Settings under which both learners must agree: TIS (the PPO ratio is against the learner's own
    pre-update policy, so this single-pass update clips nothing), KL to a reference, micro-batches of 2
    (a ballast pass on the smaller shard), warm-up, and an Adam eps large enough that the update is a
    smooth function of the gradient (with eps 1e-15 it is sign(g), and gradients at rounding level would
    flip it)."""
    return RunConfig(
        model=TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                          max_position_embeddings=32, dtype="float32"),
        loss=DapoConfig(eps_low=0.2, eps_high=0.28, tis_cap=2.0, kl_coef=0.05),
        generation=GenerationConfig(temperature=0.9),
        batch=BatchConfig(micro_batch=2),
        optim=OptimConfig(lr=1e-2, eps=1e-3, weight_decay=0.01, warmup_steps=2, grad_clip=0.5),
        engine=EngineConfig(learner="deepspeed", zero_stage=zero_stage, device="cpu",
                            activation_checkpointing=long_sequence),
    )


def initial_model(cfg: RunConfig):
    torch.manual_seed(0)
    return build_tiny_llama(cfg.model, VOCAB).eval()


def synthetic_batch(model, cfg: RunConfig, seed: int) -> TrainBatch:
    """Prompt + completion rows of different lengths; generator log-probs = the model's own plus noise
    (an off-policy generator), rewards +1/-1."""
    return off_policy_batch(model, [11, 7, 9, 12, 6], PROMPT, VOCAB, seed, noise=0.3,
                            rewards=[1.0, -1.0, 1.0, -1.0, -1.0], groups=GROUPS, fp32_head=cfg.precision.lm_head_fp32,
                            temperature=cfg.generation.temperature)


def update(learner, batch: TrainBatch, cfg: RunConfig) -> dict:
    advantages = compute_advantages(batch.rewards, batch.group_ids, by_batch, StdConfig())
    weights = aggregation_weights(batch.mask, batch.group_ids, prompt_denominator)
    result = learner.step(batch, advantages, weights)
    return {**asdict(result), "lr": learner.scheduler.get_last_lr()[0]}


def snapshot(model) -> dict:
    return {k: v.detach().clone().cpu() for k, v in model.state_dict().items()}


def build_learner(kind: str, cfg: RunConfig, model):
    settings = learner_settings_of(cfg)
    if settings.checkpointing:
        settings = replace(settings, head_chunk=LONG_HEAD_CHUNK)
    ref_model = copy.deepcopy(model).eval()
    if kind == "deepspeed":
        from rlscale.engines.learners.deepspeed_learner import DeepSpeedLearner

        return DeepSpeedLearner(settings, model, ref_model)
    from rlscale.engines.learners.torch_learner import TorchLearner

    return TorchLearner(settings, model, ref_model)


def mlp_calls(policy) -> List[int]:
    """A counter of the calls of ``policy``'s MLPs (every forward of a layer, a checkpointed layer's recompute in
    the backward among them), kept up to date in its one element."""
    calls = [0]
    for layer in policy.model.layers:
        layer.mlp.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def two_updates(kind: str, cfg: RunConfig) -> dict | None:
    """Updates 1 and 2, then 2 again from the state after 1; None on follower ranks."""
    model = initial_model(cfg)
    batches = [synthetic_batch(model, cfg, seed) for seed in (1, 2)]
    learner = build_learner(kind, cfg, model)
    calls = mlp_calls(learner.module.policy if kind == "deepspeed" else model)  # ZeRO-3 trains a copy
    if kind == "deepspeed":
        from rlscale.train.components import follower_rank

        if follower_rank():
            learner.follow()
            return None
    first = update(learner, batches[0], cfg)
    saved_model, saved_learner = snapshot(model), copy.deepcopy(learner.state_dict())
    second = update(learner, batches[1], cfg)
    weights = snapshot(model)
    model.load_state_dict(saved_model)
    learner.load_state_dict(saved_learner)
    resumed = update(learner, batches[1], cfg)
    if kind == "deepspeed":
        learner.close()
    return {"results": [first, second, resumed], "weights_after_1": saved_model, "weights_after_2": weights,
            "weights_resumed": snapshot(model), "mlp_calls": calls[0]}


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--learner", choices=("torch", "deepspeed"), required=True)
    parser.add_argument("--zero-stage", type=int, action="append", default=[])
    parser.add_argument("--long-sequence", action="store_true",
                        help="activation checkpointing and the LM head in chunks of LONG_HEAD_CHUNK positions")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.learner == "torch":  # the reference; TorchLearner does not read engine.zero_stage
        torch.save(two_updates("torch", run_config(2, args.long_sequence)), args.out)
        return
    outputs = {stage: two_updates("deepspeed", run_config(stage, args.long_sequence)) for stage in args.zero_stage}
    if None not in outputs.values():  # rank 0
        torch.save(outputs, args.out)


if __name__ == "__main__":
    main()
