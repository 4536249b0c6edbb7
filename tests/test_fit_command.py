"""``rlscale fit`` as a user runs it: the files it writes (fits.csv columns, comparison.csv, fits.json
round trip), extrapolation with --fit-until, the terminal table, and the exit codes 0 / 1 / 2."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from rlscale.fit.command import fit_command
from rlscale.fit.schema import FitResults
from rlscale.fit.synthetic import TABLE1, synthetic_curve, write_run

REQUIRED_COLUMNS = ["sweep", "variant", "seed", "x", "n_points", "cutoff", "R0", "A", "B", "C_mid", "A_lo", "A_hi",
                    "B_lo", "B_hi", "sse", "r2", "fit_until", "extrap_abs_err", "status", "message"]


def _invoke(*args):
    app = typer.Typer()
    app.command()(fit_command)
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "results"
    for i, name in enumerate(("scalerl", "gens_8", "batch_2048")):
        for seed in (0, 1):
            x, y = synthetic_curve(TABLE1[name], 48, 0.01, np.random.default_rng(10 * i + seed))
            write_run(root / "sweep_a" / f"{name}_s{seed}", x, y, seed=seed)
    (root / "sweep_a" / "flat").mkdir()
    (root / "sweep_a" / "flat" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "kind": "eval", "gpu_hours": 400.0 * i, "val_reward": 0.3}) + "\n" for i in range(40)))
    return root


def test_fit_writes_the_three_files_and_the_table(results_dir, tmp_path):
    out = tmp_path / "out"
    result = _invoke(results_dir, "--out", out, "--fit-until", "50%", "--predict-at", "20000", "--n-boot", "20")
    assert result.exit_code == 0, result.output
    with open(out / "fits.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert set(REQUIRED_COLUMNS) <= set(rows[0])
    assert {"pl_A", "pl_extrap_abs_err", "pred_20000", "pred_20000_lo", "obs_20000"} <= set(rows[0])
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 6 and [r["status"] for r in rows if r["variant"] == "flat"] == ["flat"]
    for row in ok:
        assert float(row["A_lo"]) <= float(row["A"]) <= float(row["A_hi"])
        assert float(row["extrap_abs_err"]) < 0.05 and row["pl_extrap_abs_err"] != ""
        assert row["cutoff"] == "1500.0" and row["cutoff_rule"] == "paper 1.5k GPU-h"
    with open(out / "comparison.csv") as fh:
        comparison = list(csv.DictReader(fh))
    assert [c["variant"] for c in comparison if c["rank"]] == ["batch_2048", "scalerl", "gens_8"]
    loaded = FitResults.load(out / "fits.json")
    assert len(loaded.runs) == 7 and loaded.settings.fit_until_frac == 0.5
    assert loaded.runs[1].predictions[0].x == 20000.0 and loaded.runs[1].power_law.A is not None
    assert "A [95% CI] +-0.02" in result.output and "|err| sigmoid/power" in result.output
    assert "ranked by A" in result.output and "wrote" in result.output


def test_default_out_is_the_results_dir(results_dir):
    assert _invoke(results_dir, "--n-boot", "0").exit_code == 0
    assert (results_dir / "fits.json").exists() and (results_dir / "comparison.csv").exists()


def test_exit_1_when_nothing_fits(tmp_path, results_dir):
    empty = _invoke(tmp_path)
    assert empty.exit_code == 1 and "no runs found" in empty.output
    flat_only = _invoke(results_dir / "sweep_a" / "flat", "--out", tmp_path)
    assert flat_only.exit_code == 1 and (tmp_path / "fits.csv").exists()


@pytest.mark.parametrize("args, option", [
    (["--x", "minutes"], "--x"),
    (["--method", "grid"], "--method"),
    (["--fit-until", "half"], "--fit-until"),
    (["--min-compute", "150%"], "--min-compute"),
    (["--a-grid", "0.8:0.4:0.005"], "--a-grid"),
    (["--c-mid-grid", "0:100:2.5"], "--c-mid-grid"),
    (["--margin", "-1"], "--margin"),
])
def test_usage_errors_exit_2_naming_the_option(results_dir, args, option):
    result = _invoke(results_dir, *args)
    assert result.exit_code == 2
    assert option in result.output and len(result.output.strip().splitlines()) == 1


def test_missing_source_is_a_usage_error(tmp_path):
    result = _invoke(tmp_path / "nowhere")
    assert result.exit_code == 2 and "does not exist" in result.output


def test_parallel_fitting_gives_the_same_results(results_dir):
    from rlscale.fit.api import fit_results
    from rlscale.fit.schema import FitSettings

    settings = FitSettings(n_boot=20, predict_at=[30000.0])
    assert fit_results(results_dir, settings, jobs=2).to_json() == fit_results(results_dir, settings).to_json()
