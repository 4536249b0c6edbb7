"""The DeepSpeed learner makes the same update as the torch learner: two ranks (torchrun, gloo on CPU),
ZeRO-2 and ZeRO-3, micro-batches with a ballast pass, TIS and KL, clipping and warm-up give the same
losses, statistics and weights as ``TorchLearner`` in one process, and a restored learner state repeats
the second update exactly (tests/scripts/ds_step.py makes the updates)."""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import torch

from rlscale.engines.learners.deepspeed_learner import plan_micro_batches

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ds_step.py"
STAGES = (2, 3)
STATS = ("loss", "grad_norm", "clip_fraction", "ratio_mean", "entropy", "kl", "lr", "trained_tokens")


def test_every_rank_makes_the_same_number_of_passes():
    """5 rows, 2 ranks, micro-batches of 2: shards of 3 and 2 rows, the second padded with a ballast pass."""
    first, second = (plan_micro_batches(5, 2, rank, 2) for rank in (0, 1))
    assert [(mb.rows.tolist(), mb.ballast) for mb in first] == [([0, 1], False), ([2], False)]
    assert [mb.ballast for mb in second] == [False, True] and second[0].rows.tolist() == [3, 4]
    assert [mb.rows.tolist() for mb in plan_micro_batches(5, 2, 1, 0)] == [[3, 4]]
    assert [mb.ballast for mb in plan_micro_batches(1, 2, 1, 0)] == [True]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(command: List[str], out: Path) -> dict:
    done = subprocess.run(command + ["--out", str(out)], capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return torch.load(out, weights_only=False)


def _max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


# the MLP calls of rank 0's trained policy over the script's three updates: its passes (2 per update: rows 0-1
# and row 2 of its shard) x 2 layers x the calls of a pass (the proximal policy's scoring and the trained pass)
RANK0_LAYER_PASSES = 3 * len(plan_micro_batches(5, 2, 0, 2)) * 2


def _zero_ranks(tmp_path, *flags: str) -> dict:
    """Two ranks of the DeepSpeed learner over ZeRO-2 and ZeRO-3: rank 0's output by stage."""
    stages = [arg for stage in STAGES for arg in ("--zero-stage", str(stage))]
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
              "--master_port", str(_free_port()), str(SCRIPT), "--learner", "deepspeed", *stages, *flags]
    deepspeed = _run(launch, tmp_path / "deepspeed.pt")
    assert sorted(deepspeed) == list(STAGES)
    return deepspeed


def _assert_same_updates(reference: dict, deepspeed: dict) -> None:
    """Every stage's statistics to rel 1e-5 and weights to 1e-6 of the reference's, and a resume exact."""
    for stage, out in deepspeed.items():
        for expected, got in zip(reference["results"], out["results"]):
            for key in STATS:
                assert got[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-7), (stage, key)
        for key in ("weights_after_1", "weights_after_2"):
            assert _max_difference(reference[key], out[key]) < 1e-6, (stage, key)
        assert _max_difference(out["weights_after_2"], out["weights_resumed"]) == 0.0, stage


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_two_rank_zero_updates_match_the_torch_learner(tmp_path):
    reference = _run([sys.executable, str(SCRIPT), "--learner", "torch"], tmp_path / "torch.pt")
    deepspeed = _zero_ranks(tmp_path)
    # with TIS the PPO ratio is taken against the learner's own pre-update policy, so a single-pass update
    # has ratio 1 and clips nothing; the TIS weights (pi_old / pi_gen, truncated) and the KL term act
    assert all(r["clip_fraction"] == 0 and r["ratio_mean"] == pytest.approx(1.0) for r in reference["results"])
    assert reference["results"][1]["kl"] > 0
    assert _max_difference(reference["weights_after_1"], reference["weights_after_2"]) > 1e-3  # real updates
    _assert_same_updates(reference, deepspeed)
    for stage, out in deepspeed.items():
        # the follower's CPU seconds on each update reach rank 0 (its core_hours count them on CPU)
        assert all(r["follower_cpu_s"] > 0 for r in out["results"]), stage
        assert out["mlp_calls"] == RANK0_LAYER_PASSES * 2, stage
    assert all(r["follower_cpu_s"] == 0 for r in reference["results"])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_checkpointed_layers_and_a_chunked_head_make_the_updates_of_neither(tmp_path):
    """With activation checkpointing and the LM head in chunks of 5 positions (micro-batches of up to 24),
    both ZeRO stages make the torch learner's updates without either, to the same tolerances; every trained
    pass runs each layer once more in its backward."""
    reference = _run([sys.executable, str(SCRIPT), "--learner", "torch"], tmp_path / "torch.pt")
    deepspeed = _zero_ranks(tmp_path, "--long-sequence")
    _assert_same_updates(reference, deepspeed)
    for stage, out in deepspeed.items():
        assert out["mlp_calls"] == RANK0_LAYER_PASSES * 3, stage
