"""``rlscale plan`` as a user runs it, on a synthetic sweep of the paper's Table-1 curves written as run folders
(rlscale.testing.curves.write_run): the one-line warning when the budget lies far beyond the observed compute
or below it (printed and in plan.json), and at most one crossover line per variant (plan.json keeps all)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import TABLE1, LooNoise, sweep_curves, write_run

OBSERVED = 16000.0  # GPU-hours every run reached


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """One sweep of the ten Table-1 curves, one seed each, evals every 400 GPU-hours up to OBSERVED."""
    root = tmp_path_factory.mktemp("plan") / "results"
    curves, spec = sweep_curves(dict(TABLE1), 1, np.random.default_rng(1), LooNoise(x_max=OBSERVED, every=400.0))
    for curve, variant in zip(curves, spec["variants"]):
        write_run(root / "sweep" / variant["run"], curve.x, curve.y, seed=curve.seed)
    return root


def _plan(root: Path, budget: str, *options: str):
    """The printed lines of ``rlscale plan ROOT --budget BUDGET`` and the sweep of the plan.json it wrote."""
    out = CliRunner().invoke(app, ["plan", str(root), "--budget", budget, "--n-boot", "0", *options],
                             env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    (sweep,) = json.loads((root / "plan.json").read_text())["sweeps"]
    return out.output.splitlines(), sweep


@pytest.mark.parametrize("budget, says", [("1e20", "the budget 1e+20 is 6.25e+15x the largest observed compute "
                                                   "(1.6e+04 GPU-hours (measured))"),
                                          ("1000", "the budget 1e+03 is below the smallest observed compute")])
def test_a_budget_far_beyond_or_below_the_observed_compute_is_warned_once(results, budget, says):
    lines, sweep = _plan(results, budget)
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1 and says in warnings[0], lines
    assert warnings[0] == f"warning: sweep: {sweep['warning']}"
    assert (sweep["observed_min"], sweep["observed_max"]) == (OBSERVED, OBSERVED)


@pytest.mark.parametrize("budget", ["64000", "16000", "30000"])
def test_a_budget_within_4x_of_the_observed_compute_is_not_warned(results, budget):
    lines, sweep = _plan(results, budget)
    assert sweep["warning"] == "" and not any(line.startswith("warning:") for line in lines)


def test_crossovers_print_at_most_one_line_per_variant(results):
    lines, sweep = _plan(results, "1e20")
    variants = [v["variant"] for v in sweep["variants"]]
    crossing = [line for line in lines if line.split(":")[0] in variants and "crossover" in line]
    named = [line.split(":")[0] for line in crossing]
    assert len(named) == len(set(named)) <= len(variants)
    assert len(sweep["crossovers"]) > len(crossing)  # plan.json keeps every crossover
    total = [line for line in lines if "crossovers before the budget" in line]
    assert total == [f"{len(sweep['crossovers'])} crossovers before the budget "
                     f"({sum(c['x'] <= OBSERVED for c in sweep['crossovers'])} within the observed compute, "
                     f"up to 16,000); plan.json lists them all"]
    first = min((c for c in sweep["crossovers"] if c["x"] > OBSERVED), key=lambda c: c["x"])
    assert any(line.startswith(f"{first['after']}: overtakes {first['before']} at ") for line in crossing), crossing


def test_a_plan_from_half_the_compute_counts_only_what_its_fits_saw(results):
    """Section 5 fits at half the target budget: with --fit-until 50% the observed range is the fitted half,
    so the full budget is within 4x of it, and 64,000 (8x the half) is warned."""
    lines, sweep = _plan(results, "16000", "--fit-until", "50%")
    assert sweep["observed_max"] == pytest.approx(OBSERVED / 2) and sweep["warning"] == ""
    _, far = _plan(results, "64000", "--fit-until", "50%")
    assert "8x the largest observed compute" in far["warning"]
    out = CliRunner().invoke(app, ["plan", str(results), "--budget", "16000", "--fit-until", "half"])
    assert out.exit_code == 2 and "--fit-until takes a compute value or a percentage" in out.output
