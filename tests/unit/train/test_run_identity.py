"""A run's identity (``rlscale.train.checkpoint.RunIdentity``): the hash of its config, which a checkpoint's seal
records, must not change for a config already written, or every existing run refuses to resume."""
from __future__ import annotations

from pathlib import Path

from rlscale.config import load_run_config, typed
from rlscale.train.checkpoint import RunIdentity

EXAMPLE = Path(__file__).resolve().parents[3] / "docs/examples/smollm2-headroom/headroom_smollm2/arith23_d12_2e-5"


def test_the_identity_of_a_committed_run_is_pinned():
    identity = RunIdentity.of(typed(load_run_config(EXAMPLE / "config.yaml")), EXAMPLE)
    assert identity == RunIdentity(config="fb72e1f3876c1d24c18b75d9ada360f790b172caaa6426f80881bec18b787b8d",
                                   seed=0, run="arith23_d12_2e-5")
