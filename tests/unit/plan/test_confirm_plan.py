"""``rlscale plan`` then ``rlscale confirm`` on a synthetic sweep with known truth (rlscale.testing.curves.
seeded_sweep: three settings whose A differ by 0.06, seed effects of sd 0.012 in A, binomial evals of 2,000
samples every 500 GPU-hours): the plan is made from seeds 0-2 up to 8,000 GPU-hours at a budget of 16,000,
and checked against seeds 10-12 run to 16,000 from the same truth, from a truth with one setting moved well
beyond its interval, and against the seen seeds extended, not extended, or a new seed that stops short."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import CurveSpec, EvalDraw, seeded_sweep, truncated, write_run

SPECS = {"high": CurveSpec(2542, 1.92, 0.68), "mid": CurveSpec(2542, 1.92, 0.62), "low": CurveSpec(2542, 1.92, 0.56)}
DRAW = EvalDraw(samples=2000, every=500.0, x_max=16000.0)
SEEN, NEW = (0, 1, 2), (10, 11, 12)
FITTED, BUDGET = 8000.0, 16000.0


def _write(root: Path, specs, seeds, x_max=None, rng_seed: int = 0) -> Path:
    """The runs of ``seeds`` (of 13 drawn: the draws of a seed do not depend on the others) up to ``x_max``."""
    curves, _ = seeded_sweep(specs, 13, np.random.default_rng(rng_seed), DRAW)
    for c in curves:
        if c.seed in seeds:
            c = truncated(c, x_max) if x_max else c
            write_run(root / c.sweep / f"{c.variant}_s{c.seed}", c.x, c.y, seed=c.seed, se=c.se)
    return root


def _plan(seen: Path) -> dict:
    out = CliRunner().invoke(app, ["plan", str(seen), "--budget", str(BUDGET), "--x", "gpu_hours", "--n-boot", "0"])
    assert out.exit_code == 0, out.output
    return json.loads((seen / "plan.json").read_text())


def _confirm(plan: Path, *results: Path):
    out = CliRunner().invoke(app, ["confirm", str(plan), *map(str, results)], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    (sweep,) = json.loads((results[0] / "confirm.json").read_text())["sweeps"]
    return out.output, sweep, {s["variant"]: s for s in sweep["settings"]}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("confirm")
    seen = _write(root / "seen", SPECS, SEEN, FITTED)
    return root, seen / "plan.json", _plan(seen)


def test_the_plan_predicts_new_seeds_with_a_prediction_interval_wider_than_the_seen_seeds(made):
    _, _, plan = made
    (sweep,) = plan["sweeps"]
    assert plan["y"] == "val_reward" and [v["variant"] for v in sweep["variants"]] == ["high", "mid", "low"]
    assert [v["tier"] for v in sweep["variants"]] == [1, 2, 3]
    for v in sweep["variants"]:
        new = v["new_seeds"]
        assert [(s["seed"], s["up_to"]) for s in v["seen"]] == [(s, FITTED) for s in SEEN]
        assert (new["k"], new["evals"], new["seen"], new["reason"], new["mean"]) == (3, 3, 3, "", v["predicted"])
        half = student_t.ppf(0.975, new["df"]) * math.sqrt(2 * new["sd"] ** 2 / 3 + new["eval_se"] ** 2 / 9)
        assert (new["lo"], new["hi"]) == pytest.approx((v["predicted"] - half, v["predicted"] + half))
        assert new["lo"] < v["lo"] and v["hi"] < new["hi"]
        assert 0.005 < new["eval_se"] < 0.02  # binomial SE of 2,000 samples near 0.6: 0.011


def test_new_seeds_from_the_same_truth_hit_and_the_tiers_hold(made):
    root, plan, _ = made
    output, sweep, settings = _confirm(plan, _write(root / "later", SPECS, NEW))
    assert {name: (s["verdict"], s["new"], s["tier_verdict"]) for name, s in settings.items()} == {
        name: ("hit", 3, "held") for name in SPECS}
    assert sweep["tiers"] == "tiers held" and [p["verdict"] for p in sweep["pairs"]] == ["held"] * 3
    assert all(p["resolved"] and p["order"] == "same" for p in sweep["pairs"])
    assert "confirm sweep at 16,000 GPU-hours (measured): tiers held" in output
    for name, s in settings.items():
        assert abs(s["observed"] - s["predicted"]) < s["hi"] - s["predicted"]


def test_a_setting_whose_truth_moved_beyond_its_interval_misses_and_its_tier_does_not_hold(made):
    root, plan, _ = made
    shifted = dict(SPECS, low=replace(SPECS["low"], A=0.80))
    output, sweep, settings = _confirm(plan, _write(root / "shifted", shifted, NEW))
    assert settings["low"]["verdict"] == "miss" and settings["low"]["observed"] > settings["low"]["hi"]
    assert settings["high"]["verdict"] == settings["mid"]["verdict"] == "hit"
    assert settings["low"]["tier_verdict"] == "not held" and sweep["tiers"] == "tiers not held"
    reversed_ = {(p["higher"], p["lower"]): p for p in sweep["pairs"] if p["verdict"] == "reversed"}
    assert set(reversed_) == {("high", "low"), ("mid", "low")}
    assert all(p["order"] == "reversed" and p["resolved"] for p in reversed_.values())
    assert "tiers not held" in output and "miss" in output


def test_seen_seeds_count_when_extended_past_the_budget_and_never_as_they_were(made):
    root, plan, _ = made
    _, sweep, settings = _confirm(plan, _write(root / "extended", SPECS, SEEN))
    assert {s["verdict"] for s in settings.values()} == {"hit"}
    assert {(s["new"], s["extended"]) for s in settings.values()} == {(0, 3)}
    assert {r["status"] for r in sweep["runs"]} == {"extended"}
    # the runs the plan was fitted on, and a new seed that stops at 12,000: no evidence, said so
    as_planned = _write(root / "as_planned", SPECS, SEEN, FITTED)
    _write(root / "as_planned", SPECS, (10,), 12000.0)
    _, sweep, settings = _confirm(plan, as_planned)
    assert {s["verdict"] for s in settings.values()} == {"not reached"}
    assert all(s["note"] == "not reached (1); seen seed: not new evidence (3)" for s in settings.values())
    assert sweep["tiers"] == "tiers not compared" and sweep["pairs"] == []
    # both folders: the extended copy of a seed is kept, the copy as planned is a duplicate
    _, sweep, settings = _confirm(plan, root / "extended", as_planned)
    assert {(s["verdict"], s["extended"]) for s in settings.values()} == {("hit", 3)}
    assert sorted({r["status"] for r in sweep["runs"]}) == ["duplicate: left out", "extended", "not reached"]


def test_the_report_shows_the_check_beside_the_results(made):
    root, plan, _ = made
    later = _write(root / "report", SPECS, NEW)
    _confirm(plan, later)
    out = CliRunner().invoke(app, ["report", "--html", str(later)])
    assert out.exit_code == 0, out.output
    page = (later / "report.html").read_text()
    section = page[page.index('<section id="confirm">'):]
    assert "8 Plan checked against later runs" in section and section.count('data-verdict="hit"') == 3
    assert "high &gt; mid" in section and 'href="#confirm"' in page
    terminal = CliRunner().invoke(app, ["report", str(later)], env={"COLUMNS": "300"})
    assert terminal.exit_code == 0 and "confirm sweep at 16,000 GPU-hours (measured): tiers held" in terminal.output


def test_new_seeds_fall_in_the_prediction_interval_at_about_its_level(tmp_path):
    """Eight sweeps of the same truth (24 settings): the intervals of 3 new seeds hold 95 % of means, so
    20-24 hits (P(X < 20) = 0.6 % for 24 draws at 95 %), while the truth moved by 0.1 is missed every time."""
    hits = moved = 0
    for rng_seed in range(1, 9):
        root = tmp_path / str(rng_seed)
        plan = _plan(_write(root / "seen", SPECS, SEEN, FITTED, rng_seed))
        _, _, settings = _confirm(root / "seen" / "plan.json", _write(root / "later", SPECS, NEW, rng_seed=rng_seed))
        hits += sum(s["verdict"] == "hit" for s in settings.values())
        up = {k: replace(v, A=v.A + 0.1) for k, v in SPECS.items()}
        _, _, settings = _confirm(root / "seen" / "plan.json", _write(root / "up", up, NEW, rng_seed=rng_seed))
        moved += sum(s["verdict"] == "miss" for s in settings.values())
        assert plan["sweeps"][0]["variants"][0]["new_seeds"]["k"] == 3
    assert 20 <= hits <= 24 and moved == 24, (hits, moved)


def test_a_tie_the_new_runs_separate_refines_the_tiers_and_a_reversal_breaks_them():
    from rlscale.fit.results import Difference
    from rlscale.plan.confirm import AHEAD, TIED, PairCheck, _tier_verdict

    def pair(planned, verdict):
        return PairCheck("a", "b", planned, Difference(0.05, 0.03, 0.07, "seeds n=3"), "same", 0.001, True, verdict)

    assert _tier_verdict([pair(AHEAD, "held"), pair(TIED, "within margin")]) == "held"
    assert _tier_verdict([pair(AHEAD, "held"), pair(TIED, "separated")]) == "refined"
    assert _tier_verdict([pair(TIED, "separated"), pair(TIED, "separated")]) == "refined"
    assert _tier_verdict([pair(AHEAD, "unresolved"), pair(TIED, "separated")]) == "unresolved"
    assert _tier_verdict([pair(AHEAD, "reversed"), pair(TIED, "within margin")]) == "not held"
    assert _tier_verdict([pair(TIED, "unresolved")]) == "unresolved"
