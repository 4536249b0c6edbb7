"""``rlscale fit --y val_reward,val_reward/code``: every metric fitted on its own (the first's files in the results
folder as for one metric, the others' in fits-<metric>/, listed in fits-metrics.json), the report's parallel
curves from them, and one-line usage errors that write nothing. Runs are synthetic with known truth: the
in-distribution curve is Table 1's math row, the code metric its code row (different A, B and C_mid)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from rlscale.cli.fit import fit_command
from rlscale.cli.report import report_command
from rlscale.fit.by_metric import further_fits
from rlscale.fit.forms import sigmoid
from rlscale.fit.results import FitResults
from rlscale.report.parallel import correlation
from rlscale.testing.curves import R0, TABLE1

MATH, CODE = TABLE1["math"], TABLE1["code"]


def _app(command):
    app = typer.Typer()
    app.command()(command)
    return app


def _fit(*args):
    return CliRunner().invoke(_app(fit_command), [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture()
def results(tmp_path):
    """Two seeds of one variant; each eval line holds both metrics, N(0, 0.005) noise on each."""
    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 24000.0, 41)
    for seed in (0, 1):
        run = tmp_path / "results" / "mix" / f"base_s{seed}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(f"seed: {seed}\n")
        lines = []
        for step, (c, math, code) in enumerate(zip(x, sigmoid(x, R0, MATH.A, MATH.B, MATH.C_mid),
                                                   sigmoid(x, R0, CODE.A, CODE.B, CODE.C_mid))):
            lines.append({"step": step, "kind": "eval", "gpu_hours": float(c), "flops": float(c) * 3.6e18,
                          "val_reward": float(math + rng.normal(0, 0.005)),
                          "val_reward/code": float(code + rng.normal(0, 0.005)), "val_reward/flat": R0})
        (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path / "results"


def test_each_metric_is_fitted_as_alone_and_written_apart(results, tmp_path):
    done = _fit(results, "--y", "val_reward,val_reward/code", "--n-boot", "20")
    assert done.exit_code == 0, done.output
    first = FitResults.load(results / "fits.json")
    code = FitResults.load(results / "fits-val_reward--code" / "fits.json")
    assert first.settings.y == "val_reward" and code.settings.y == "val_reward/code"
    for fits, truth in ((first, MATH), (code, CODE)):
        for run in fits.runs:
            assert run.A == pytest.approx(truth.A, abs=0.02) and run.B == pytest.approx(truth.B, rel=0.25)
    assert json.loads((results / "fits-metrics.json").read_text()) == {"metrics": ["val_reward", "val_reward/code"]}
    assert "y = val_reward/code" in " ".join(done.output.split())
    alone = tmp_path / "alone"
    assert _fit(results, "--y", "val_reward/code", "--n-boot", "20", "--out", alone).exit_code == 0
    assert (alone / "fits.json").read_text() == (results / "fits-val_reward--code" / "fits.json").read_text()
    assert [f.settings.y for f in further_fits(results)[0]] == ["val_reward/code"]


def test_a_fit_of_one_metric_leaves_the_first_files_as_before_and_retires_the_others(results, tmp_path):
    assert _fit(results, "--y", "val_reward,val_reward/code", "--n-boot", "20").exit_code == 0
    assert _fit(results, "--n-boot", "20").exit_code == 0
    assert not (results / "fits-metrics.json").exists() and further_fits(results) == ([], [])
    assert (results / "fits-val_reward--code" / "fits.json").exists()  # kept, no longer shown
    one = tmp_path / "one"
    assert _fit(results, "--n-boot", "20", "--out", one).exit_code == 0
    assert (one / "fits.json").read_text() == (results / "fits.json").read_text()


@pytest.mark.parametrize("y, needle", [("val_reward,val_reward/nope", "'val_reward/nope' is in no eval line"),
                                       ("val_reward,val_reward", "--y names val_reward more than once"),
                                       ("val_reward,", "--y takes metric names separated by commas")])
def test_a_bad_metric_list_is_one_line_and_writes_nothing(results, y, needle):
    done = _fit(results, "--y", y)
    assert done.exit_code == 2 and needle in done.output and len(done.output.strip().splitlines()) == 1
    assert not (results / "fits.json").exists() and not (results / "fits-metrics.json").exists()


def test_a_first_metric_without_a_fit_writes_nothing_and_says_which(results):
    done = _fit(results, "--y", "val_reward/flat,val_reward", "--n-boot", "0")
    assert done.exit_code == 1 and "no run fitted on val_reward/flat, the first --y metric" in done.output
    assert not (results / "fits.json").exists() and not (results / "fits-val_reward").exists()


def test_the_report_shows_the_metrics_in_parallel(results):
    assert _fit(results, "--y", "val_reward,val_reward/code", "--n-boot", "20").exit_code == 0
    done = CliRunner().invoke(_app(report_command), [str(results), "--html"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    page = (results / "report.html").read_text()
    assert "val_reward, val_reward/code in parallel" in page and 'alt="parallel curves of mix"' in page
    code = FitResults.load(results / "fits-val_reward--code" / "fits.json")
    assert f"{code.runs[0].A:.3f}" in page and "r with val_reward" in page


def test_tracking_is_pearsons_r_with_a_fisher_interval():
    t = correlation(np.array([1.0, 2, 3, 4, 5]), np.array([2.0, 4, 5, 4, 5]))
    assert (t.r, t.n) == (pytest.approx(0.774597, abs=1e-6), 5)
    assert (t.lo, t.hi) == (pytest.approx(-0.3400, abs=1e-3), pytest.approx(0.98433, abs=1e-4))  # z +- 1.96/sqrt(2)
    assert correlation(np.array([1.0, 2, 3]), np.array([1.0, 2, 3])) is None  # too few evals for an interval
    assert correlation(np.array([1.0, 2, 3, 4]), np.array([0.5] * 4)) is None  # a flat metric tracks nothing
