"""Shared inputs of the command tests: a sweep of three Table-1 variants, two seeds each, with known Eq.-1
parameters (rlscale.testing.curves)."""
from __future__ import annotations

import numpy as np
import pytest

from rlscale.testing.curves import TABLE1, synthetic_curve, write_run


@pytest.fixture(scope="module")
def three_variants(tmp_path_factory):
    """A results folder whose sweep_a holds scalerl, gens_8 and batch_2048 (true A 0.610, 0.585, 0.645),
    seeds 0 and 1, 48 evals each with eval noise 0.01 (one folder per test module)."""
    root = tmp_path_factory.mktemp("cli") / "results"
    for i, name in enumerate(("scalerl", "gens_8", "batch_2048")):
        for seed in (0, 1):
            x, y = synthetic_curve(TABLE1[name], 48, 0.01, np.random.default_rng(10 * i + seed))
            write_run(root / "sweep_a" / f"{name}_s{seed}", x, y, seed=seed)
    return root
