"""Pruning and planning on synthetic sweeps with known truth (Table 1 of the paper, paper-scale noise):
the pruning rule (rlscale.fit.pruning), the sweep's rung decisions on run folders (rlscale.sweep.prune),
pruned runs in fits, and ``rlscale plan`` (rlscale.plan.planner)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

from rlscale.fit.api import fit_results
from rlscale.fit.forms import sigmoid
from rlscale.fit.predict import predict_variants
from rlscale.fit.pruning import decide
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitSettings
from rlscale.testing.curves import R0, TABLE1, LooNoise, sweep_curves, truncated, write_run
from rlscale.plan.planner import plan_sweeps
from rlscale.runfolder import write_status
from rlscale.runfolder.status import PRUNE_REQUEST, RunState
from rlscale.sweep.prune import PruningConfig, advance, rung_step
from rlscale.sweep.spec import SpecError
from rlscale.sweep.state import SweepRecord, VariantRecord

SETTINGS = FitSettings(x="gpu_hours", n_boot=50)
SPECS = {"scalerl": TABLE1["scalerl"], "copy": TABLE1["scalerl"], "scout_moe": TABLE1["scout_moe"],
         "gen_32k": TABLE1["gen_32k"], "gens_8": TABLE1["gens_8"]}


def _decisions(seed: int, rung: float):
    curves, _ = sweep_curves(SPECS, 3, np.random.default_rng(seed))
    runs = [fit_curve(truncated(c, rung), SETTINGS) for c in curves]
    return {d.variant: d for d in decide(predict_variants(runs, SETTINGS, 16000.0), 0.02, 0.95)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rule_at_half_the_budget_stops_the_hopeless_and_keeps_the_best(seed):
    # truth at 16k: scout_moe 0.669, scalerl = copy 0.601, gens_8 0.582, gen_32k 0.528: all > 0.02 below
    d = _decisions(seed, 8000.0)
    assert not d["scout_moe"].pruned and d["scout_moe"].gap is None
    assert d["gens_8"].pruned and d["scalerl"].pruned and d["copy"].pruned
    assert d["gens_8"].gap.lo > 0 and d["gens_8"].gap.value > 0.02
    # gen_32k's C_mid (11272) lies beyond 8k: its A is not identified, and an unbent curve is never stopped
    assert not d["gen_32k"].pruned and d["gen_32k"].gap.lo > 0


def test_rule_never_stops_a_curve_that_has_not_bent():
    # at 4k gen_32k (C_mid 11272) has made ~8 % of its rise: its A is not identified, it goes on
    for seed in range(3):
        assert not _decisions(seed, 4000.0)["gen_32k"].pruned


def test_rule_never_stops_the_true_best_of_two_close_variants():
    specs = {"a": TABLE1["scalerl"], "b": TABLE1["batch_512"]}  # 0.601 vs 0.592 at 16k
    stopped = []
    for seed in range(8):
        curves, _ = sweep_curves(specs, 3, np.random.default_rng(seed))
        runs = [fit_curve(truncated(c, 8000.0), SETTINGS) for c in curves]
        for d in decide(predict_variants(runs, SETTINGS, 16000.0), 0.02, 0.95):
            if d.pruned:
                assert d.gap.value > 0.02 and d.gap.lo > 0
                stopped.append(d.variant)
    assert "a" not in stopped and len(stopped) <= 2


def test_rung_step_is_the_last_eval_at_or_below_the_fraction():
    assert rung_step(0.25, 100, 10) == 20 and rung_step(0.5, 100, 10) == 50 and rung_step(0.05, 100, 10) == 10
    assert rung_step(0.25, 400, 25) == 100


def test_pruning_block_errors_name_the_field():
    assert PruningConfig.parse(True, "w") == PruningConfig()
    with pytest.raises(SpecError, match="w.rungs"):
        PruningConfig.parse({"rungs": [0.5, 0.25]}, "w")
    with pytest.raises(SpecError, match="w.marg"):
        PruningConfig.parse({"marg": 0.1}, "w")


def _sweep_folder(root: Path, specs, seeds: int, x_max: float) -> SweepRecord:
    """Run folders with synthetic metrics up to ``x_max`` (eval every 200 GPU-h = 1 step), status and
    config.yaml (max_steps 80 = 16k GPU-h, eval_every 1); the record stores each run folder relative to the
    sweep folder ``root``, as ``rlscale sweep`` does (run_dir = the run's name)."""
    curves, spec = sweep_curves(specs, seeds, np.random.default_rng(7), LooNoise(x_max=x_max))
    variants = []
    for c, v in zip(curves, spec["variants"]):
        run_dir = root / v["run"]
        write_run(run_dir, c.x, c.y, seed=c.seed)
        trainer = "trainer: {max_steps: 80, eval_every: 1}"
        (run_dir / "config.yaml").write_text(f"seed: {c.seed}\n{trainer}\n")
        write_status(run_dir, RunState.PENDING, "paused")
        variants.append(VariantRecord(name=v["name"], run=v["run"], config="config", overrides=[], axis=v["axis"],
                                      seed=c.seed, run_dir=v["run"]))
    return SweepRecord(name="sweep", kind="grid", base="scalerl", launcher="local", spec="", seeds=seeds,
                       overrides=[], variants=variants)


def test_sweep_decides_a_rung_once_every_run_reached_it_and_requests_the_stops(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)  # run folders resolve against the sweep folder, not the working directory
    specs = {"scalerl": TABLE1["scalerl"], "scout_moe": TABLE1["scout_moe"], "gens_8": TABLE1["gens_8"]}
    config = PruningConfig(rungs=(0.25, 0.5), n_boot=50)
    record = _sweep_folder(tmp_path, specs, 2, 8000.0)  # every run at step 40 = 50 %
    state = advance(tmp_path, record, config)
    assert [r.step for r in state.rungs] == [20, 40]
    stopped = set(state.pruned)
    assert "scout_moe" not in stopped and {"scalerl", "gens_8"} <= stopped
    for v in record.variants:
        assert (tmp_path / v.run_dir / PRUNE_REQUEST).exists() == (v.name in stopped)
    # saved: the planned steps after step 40 of the 4 pruned runs, of 6 x 80
    assert state.saved_steps == 4 * 40 and state.saved_fraction == pytest.approx(160 / 480)
    assert json.loads((tmp_path / "pruning.json").read_text())["rungs"][1]["pruned"] == state.rungs[1].pruned
    assert advance(tmp_path, record, config).rungs == state.rungs  # decided once


def test_sweep_waits_for_the_slowest_run(tmp_path):
    record = _sweep_folder(tmp_path, {"scalerl": TABLE1["scalerl"], "gens_8": TABLE1["gens_8"]}, 1, 8000.0)
    metrics = tmp_path / record.variants[1].run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(lines[:2 * 15]) + "\n")  # step 14
    assert advance(tmp_path, record, PruningConfig(n_boot=20)).rungs == []


def test_a_pruned_run_is_fitted_flagged_and_left_out_of_the_comparison(tmp_path):
    specs = {"scalerl": TABLE1["scalerl"], "gens_8": TABLE1["gens_8"]}
    record = _sweep_folder(tmp_path / "sweep", specs, 1, 16000.0)
    pruned = tmp_path / "sweep" / record.variants[1].run_dir
    lines = (pruned / "metrics.jsonl").read_text().splitlines()
    (pruned / "metrics.jsonl").write_text("\n".join(lines[:2 * 41]) + "\n")
    write_status(pruned, RunState.PRUNED, "pruned at 50 %")
    for v in record.variants[:1]:
        write_status(tmp_path / "sweep" / v.run_dir, RunState.DONE)
    results = fit_results(tmp_path, FitSettings(n_boot=20))
    status = {r.variant: r.status for r in results.runs}
    assert status == {"scalerl": "ok", "gens_8": "pruned"}
    fit = next(r for r in results.runs if r.variant == "gens_8")
    assert fit.A is not None and "partial curve" in fit.message
    rows = [row for row in results.comparison if row.variant == "gens_8"]
    assert all(row.rank is None and row.dA is None for row in rows), rows


def test_plan_finds_the_batch_crossover_and_the_best_setting():
    specs = {"b768": TABLE1["scalerl"], "b512": TABLE1["batch_512"], "b2048": TABLE1["batch_2048"]}
    curves, sweep = sweep_curves(specs, 3, np.random.default_rng(3), LooNoise(a_jitter=0.0, point=0.001,
                                                                                 x_max=32000.0, every=400.0))
    for v in sweep["variants"]:  # the run-length keys a spec sets to keep the budget equal are not the setting
        steps = 768 * 400 // int(v["name"][1:])
        v["overrides"] = [f"trainer.max_steps={steps}", f"trainer.eval_every={steps // 40}"] + (
            [] if v["name"] == "b768" else [f"batch.prompts={v['name'][1:]}"])
    settings = FitSettings(x="gpu_hours", n_boot=0)
    runs = [fit_curve(c, settings) for c in curves]
    (early,) = plan_sweeps(runs, {"sweep": sweep}, settings, 8000.0)
    (late,) = plan_sweeps(runs, {"sweep": sweep}, settings, 100000.0)
    assert "b2048" not in early.best and late.best == ["b2048"]
    assert late.best_setting == [{"batch.prompts": "2048"}] and late.scaling_keys == ["batch.prompts"]
    s = TABLE1
    true_x = brentq(lambda c: float(sigmoid(c, R0, s["scalerl"].A, s["scalerl"].B, s["scalerl"].C_mid)
                                     - sigmoid(c, R0, s["batch_2048"].A, s["batch_2048"].B, s["batch_2048"].C_mid)),
                    16000, 100000)
    cross = [c for c in late.crossovers if {c.before, c.after} == {"b768", "b2048"}]
    assert len(cross) == 1 and cross[0].before == "b768" and cross[0].x == pytest.approx(true_x, rel=0.1)


def test_report_page_shows_the_plan_of_rlscale_plan(tmp_path):
    """rlscale plan writes plan.json; rlscale report --html shows it as its plan section."""
    import subprocess
    import sys

    specs = {"b768": TABLE1["scalerl"], "b2048": TABLE1["batch_2048"]}
    curves, spec = sweep_curves(specs, 1, np.random.default_rng(5), LooNoise(a_jitter=0.0, point=0.001,
                                                                              x_max=32000.0, every=800.0))
    for c, v in zip(curves, spec["variants"]):
        write_run(tmp_path / "sweep" / v["run"], c.x, c.y, seed=c.seed)
    cli = [sys.executable, "-m", "rlscale.cli"]
    done = subprocess.run(cli + ["plan", str(tmp_path), "--budget", "100000", "--n-boot", "20"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    done = subprocess.run(cli + ["report", "--html", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "report.html").read_text()
    assert "7 Plan at a budget" in page
    best = plan["sweeps"][0]["best"]
    assert ("best " + best[0]) in page if len(best) == 1 else "tie between" in page
