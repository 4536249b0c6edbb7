"""``rlscale fit`` as a user runs it: the files it writes (fits.csv columns, comparison.csv, fits.json
round trip), extrapolation with --fit-until, the terminal table, and the exit codes 0 / 1 / 2."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from rlscale.cli.fit import fit_command
from rlscale.fit.results import FitResults
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

REQUIRED_COLUMNS = ["sweep", "variant", "seed", "x", "n_points", "cutoff", "R0", "A", "B", "C_mid", "A_lo", "A_hi",
                    "B_lo", "B_hi", "sse", "r2", "fit_until", "extrap_abs_err", "status", "message"]


def _invoke(*args):
    app = typer.Typer()
    app.command()(fit_command)
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def results_dir(three_variants):
    root = three_variants
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
        assert float(row["cutoff"]) == pytest.approx(min(1500.0, 0.1 * float(row["fit_until"])))
    with open(out / "comparison.csv") as fh:
        comparison = list(csv.DictReader(fh))
    # two seeds fitted on half of the compute, paired by seed: gens_8 (true A 0.585) is below batch_2048 (0.645)
    # by more than the margin, but over the ranking's 4 comparisons (Bonferroni) two seeds do not resolve it
    assert [(c["variant"], c["rank"], c["tie"]) for c in comparison if c["rank"]] == [
        ("batch_2048", "1", "True"), ("gens_8", "1", "True"), ("scalerl", "1", "True")]
    assert {c["family_size"] for c in comparison if c["rank"]} == {"4"}
    assert "Bonferroni over 4 comparisons" in result.output
    # at 50 % of the compute seed 0's A is not identified for batch_2048 and scalerl: their dA rests on seed 1
    # alone, their B at the common A on both seeds, and the interval source names both
    sources = [c["interval_source"] for c in comparison if c["variant"] != "batch_2048" and c["rank"]]
    assert sources == ["dA unpaired n=2/1, dB paired n=2", "dA unpaired n=1, dB paired n=2"]
    loaded = FitResults.load(out / "fits.json")
    assert len(loaded.runs) == 7 and loaded.settings.fit_until_frac == 0.5
    assert loaded.runs[1].predictions[0].x == 20000.0 and loaded.runs[1].power_law.A is not None
    assert "A [95% CI] +-0.02" in result.output and "|err| sigmoid/power" in result.output
    assert "GPU-hours (measured)" in result.output and loaded.settings.x == "gpu_hours"
    assert loaded.settings.x_requested == "auto"
    assert {"dA_lo", "dA_hi", "dB_lo", "dB_hi", "interval_source", "reason", "needs", "tie"} <= set(comparison[0])
    assert {"A_identified", "A_identified_reason", "eval_se"} <= set(rows[0])
    assert "ranked by A" in result.output and "wrote" in result.output


def test_default_out_is_the_results_dir(results_dir):
    assert _invoke(results_dir, "--n-boot", "0").exit_code == 0
    assert (results_dir / "fits.json").exists() and (results_dir / "comparison.csv").exists()


def test_the_folder_defaults_to_results_as_in_every_command(results_dir, monkeypatch):
    assert results_dir.name == "results"
    monkeypatch.chdir(results_dir.parent)
    (results_dir / "fits.json").unlink(missing_ok=True)
    assert _invoke("--n-boot", "0").exit_code == 0
    assert (results_dir / "fits.json").exists()


def test_exit_1_when_nothing_fits_and_earlier_outputs_survive(tmp_path, results_dir):
    empty = _invoke(tmp_path)
    assert empty.exit_code == 1 and "no runs found" in empty.output
    out = tmp_path / "out"
    assert _invoke(results_dir, "--out", out, "--n-boot", "0").exit_code == 0
    before = {name: (out / name).read_bytes() for name in ("fits.json", "fits.csv", "comparison.csv")}
    flat_only = _invoke(results_dir / "sweep_a" / "flat", "--out", out)
    assert flat_only.exit_code == 1 and "no run fitted: nothing written" in flat_only.output
    assert {name: (out / name).read_bytes() for name in before} == before


def test_a_mistyped_metric_is_one_line_listing_the_metrics_and_writes_nothing(results_dir, tmp_path):
    out = tmp_path / "out"
    for option, value in (("--y", "val_rewards"), ("--x", "core_hours")):
        result = _invoke(results_dir, option, value, "--out", out)
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
        assert f"{option} '{value}' is in no eval line; eval metrics found: flops, gpu_hours" in result.output
        assert "val_reward" in result.output and not out.exists()


def _cpu_run(folder, x, y, core_hours):
    """A run as the trainer writes it on CPU: counted flops and measured core_hours, no gpu_hours."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("seed: 0\n")
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "kind": "eval", "flops": float(c) * 1e15, "core_hours": float(h),
                    "val_reward": float(r), "val_reward_se": 0.004, "val_samples": 2000}) + "\n"
        for i, (c, r, h) in enumerate(zip(x, y, core_hours))))


def test_identical_curves_with_perturbed_measured_times_give_identical_fits(tmp_path):
    """The default --x auto picks flops when the runs carry no gpu_hours (CPU), so a run slowed by load
    fits exactly like its twin; with --x core_hours the fitted points are still the same evals."""
    from rlscale.fit.api import fit_results
    from rlscale.fit.results import FitSettings

    x, y = synthetic_curve(TABLE1["scalerl"], 40, 0.01, np.random.default_rng(4))
    slow = np.maximum.accumulate(x * np.random.default_rng(5).uniform(0.8, 1.3, x.size)) / 3600
    roots = []
    for name, hours in (("quiet", x / 3600), ("loaded", slow)):
        roots.append(tmp_path / name)
        _cpu_run(roots[-1] / "sweep" / "scalerl", x, y, hours)
    fits = [fit_results(root, FitSettings(n_boot=20)).runs[0] for root in roots]
    assert fits[0].x == fits[1].x == "flops" and fits[0].t_axis == "flops"
    key = ("A", "B", "C_mid", "A_lo", "A_hi", "n_points", "cutoff", "A_identified", "eval_se", "eval_samples")
    assert [getattr(fits[0], k) for k in key] == [getattr(fits[1], k) for k in key]
    assert fits[0].eval_se == 0.004 and fits[0].eval_samples == 2000
    measured = [fit_results(root, FitSettings(x="core_hours", n_boot=0)).runs[0] for root in roots]
    assert measured[0].n_points == measured[1].n_points and measured[0].A != measured[1].A


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
    from rlscale.fit.results import FitSettings

    settings = FitSettings(n_boot=20, predict_at=[30000.0])
    assert fit_results(results_dir, settings, jobs=2).to_json() == fit_results(results_dir, settings).to_json()


def test_no_correction_judges_each_comparison_of_the_ranking_alone(results_dir, tmp_path):
    out = tmp_path / "alone"
    # on 60 % of the compute (every seed identified; at 50 % the data of one seed of batch_2048 and of scalerl
    # allow a bend in the last half of their evals) the default correction ranks batch_2048 and scalerl
    # (true A 0.645, 0.610) together above gens_8 (0.585); alone at 95 % every comparison resolves
    result = _invoke(results_dir, "--out", out, "--fit-until", "60%", "--n-boot", "0", "--no-correction")
    assert result.exit_code == 0, result.output
    with open(out / "comparison.csv") as fh:
        comparison = list(csv.DictReader(fh))
    assert [(c["variant"], c["rank"], c["tie"]) for c in comparison if c["rank"]] == [
        ("batch_2048", "1", "False"), ("scalerl", "2", "False"), ("gens_8", "3", "False")]
    assert "each at 5% alone" in result.output


def _pipe_progress(times):
    """A WorkProgress printing into a string, as in a pipe, on the clock ``times``."""
    import io

    from rich.console import Console

    from rlscale.cli.progress import WorkProgress

    out = io.StringIO()
    clock = iter(times)
    return WorkProgress(Console(file=out, width=200), clock=lambda: next(clock)), out


def test_fit_in_a_pipe_prints_a_line_every_ten_seconds():
    """Runs fitted every 3 s in a pipe: a line when the runs are read, then one each time 10 s have passed since the
    last line (not since the last run)."""
    from rlscale.cli.fit import announced

    progress, out = _pipe_progress(range(0, 100, 3))
    progress.phase("fitting")  # t=3: nothing yet
    show = announced(progress, "under r")
    for done in range(9):
        show(done, 8)
    # t=6 the first line; counts at t=9, 12, 15, 18 (run 3: 12 s since the first line), ..., 30 (run 7)
    assert out.getvalue().splitlines() == ["fitting 8 runs under r", "fitting: run 3/8 (18 s)",
                                           "fitting: run 7/8 (30 s)"]


def test_a_long_phase_in_a_pipe_still_prints_a_line_every_ten_seconds():
    """Comparing the variants reports no run: the heartbeat's ticks (one a second) print the phase once 10 s have
    passed since the last line, so a pipe is never silent for longer."""
    progress, out = _pipe_progress(range(0, 100))
    progress.phase("comparing the variants")  # t=1
    for _ in range(25):  # t=2..26
        progress.tick()
    assert out.getvalue().splitlines() == ["comparing the variants (10 s)", "comparing the variants (20 s)"]


def test_the_heartbeat_prints_through_a_silent_phase():
    """The real heartbeat thread, on a pipe console with a 0.2 s interval: lines come while the work is silent."""
    import io
    import time

    from rich.console import Console

    from rlscale.cli.progress import work_progress

    out = io.StringIO()
    with work_progress(Console(file=out, width=200), every_s=0.2) as progress:
        progress.phase("comparing the variants")
        time.sleep(2.5)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("comparing the variants (") for line in lines), lines


def test_short_runs_that_fit_none_say_so_and_exit_1(tmp_path):
    """Three runs of 2 evals in the window: the last progress line counts the runs fitted as the exit status
    does (none: exit 1), not the runs tried."""
    for name in ("scalerl", "math", "code"):
        x, y = synthetic_curve(TABLE1[name], 2, 0.01, np.random.default_rng(0), x_max=16000)
        write_run(tmp_path / "r" / "sw" / name, x, y)
    result = _invoke(tmp_path / "r")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert [ln for ln in lines if ln.startswith("fitted")] == [lines[1]]
    assert lines[1].startswith("fitted 0 of 3 runs in ") and lines[1].endswith("; not fitted: 3 too_few_points")
    assert "no run fitted: nothing written" in result.output


def test_three_hundred_runs_in_a_pipe(tmp_path):
    """``rlscale fit`` of 300 runs, its stderr a file: the first line once the runs are read, the tally at the
    end, every line a line of its own (no spinner frames or escape codes)."""
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    for i in range(300):
        x, y = synthetic_curve(TABLE1["scalerl"], 12, 0.01, rng)
        write_run(tmp_path / "r" / "sw" / f"v{i // 3}_s{i % 3}", x, y, seed=i % 3)
    with open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.run([sys.executable, "-m", "rlscale.cli", "fit", str(tmp_path / "r"), "--n-boot", "0"],
                              stdout=subprocess.DEVNULL, stderr=err, timeout=600)
    lines = (tmp_path / "err.txt").read_text().splitlines()
    assert proc.returncode == 0, lines
    assert lines[0] == f"fitting 300 runs under {tmp_path / 'r'} (0 bootstrap resamples)"
    assert lines[-1].startswith("fitted 300 of 300 runs in ")
    assert all(ln.startswith(("fitting", "fitted", "reading the runs (", "comparing the variants (", "refitting"))
               for ln in lines), lines
    assert "\x1b" not in "".join(lines)


def test_an_unbounded_bootstrap_is_refused_with_its_cost(results_dir, tmp_path):
    """--n-boot above 100,000 is refused in one line before any fit, stating CPU time and memory from the
    measured per-resample cost (rlscale.fit.bootstrap.bootstrap_cost); nothing is written."""
    from rlscale.fit.bootstrap import bootstrap_cost

    out = tmp_path / "out"
    result = _invoke(results_dir, "--out", out, "--n-boot", "100000000")
    assert result.exit_code == 2
    line = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "--n-boot 100,000,000 is above 100,000" in line[0] and "pass --force" in line[0]
    assert "CPU-hours" in line[0] and "GiB for 7 runs" in line[0]
    assert not out.exists()
    seconds, peak = bootstrap_cost(10 ** 8, [40] * 7)
    assert seconds == pytest.approx(10 ** 8 * 7 * (1.2e-4 + 40 * 1.5e-6)) and peak == 64 * 10 ** 8
    assert bootstrap_cost(10 ** 6, [100_000])[0] == pytest.approx(10 ** 6 * (1.2e-4 + 500 * 1.5e-6))
