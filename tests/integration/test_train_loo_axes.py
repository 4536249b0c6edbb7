"""Every axis of sweeps/loo.yaml changes training on the embedded default (Section 4's leave-one-out): the
first train steps of each one-axis reversion differ from the ScaleRL base's in what the update saw or did.

One short run per variant, the sweep's own overrides on top of a common short setting: 4 prompts per step
from a pool of 8, so the third step starts the second epoch, where No-Positive-Resampling (threshold
lowered to 0.25 so that the first epoch removes prompts) and uniform resampling draw different prompts. The eval split and the warm-up are the default's (the cached base model is reused)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from rlscale.config import compose_run_config, typed
from rlscale.runfolder.metrics import MEASURED_FIELDS, read_metrics
from rlscale.sweep.spec import find_spec, load_spec
from rlscale.train.loop import RunLoop

pytestmark = pytest.mark.slow

SHORT = ["batch.prompts=4", "curriculum.pool_size=8", "trainer.max_steps=4", "trainer.eval_every=4",
         "trainer.checkpoint_every=4", "engine.threads=1"]
THRESHOLD = "curriculum.threshold=0.25"  # No-Positive-Resampling's knob: every run but the uniform one
MEASURED = MEASURED_FIELDS


def train_lines(overrides: List[str], run_dir: Path) -> List[Dict]:
    threshold = [] if "curriculum=uniform" in overrides else [THRESHOLD]
    loop = RunLoop(typed(compose_run_config([*SHORT, *threshold, *overrides])), run_dir)
    try:
        loop.run()
    finally:
        loop.close()
    records, _ = read_metrics(run_dir / "metrics.jsonl")
    return [{k: v for k, v in r.items() if k not in MEASURED} for r in records if r["kind"] == "train"]


def test_every_loo_axis_changes_the_first_train_steps(tmp_path):
    spec = load_spec(find_spec("loo"))
    base = train_lines(list(spec.base.overrides), tmp_path / "base")
    assert [r["step"] for r in base] == [1, 2, 3, 4]
    assert base[-1]["pool_active"] < 8  # the first epoch removed prompts: the curriculum acts
    same = []
    for variant in spec.variants:
        lines = train_lines(list(variant.overrides), tmp_path / variant.name)
        if lines == base:
            same.append(variant.name)
    assert not same, f"these reversions train exactly like the base: {same}"
