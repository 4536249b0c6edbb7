"""The misfit test (rlscale.fit.misfit) on runs of known truth: drifting sigmoid runs pass (at most 5 % noted),
a step change of +0.10 at 70 % of the compute is found near where it is, a power law the sigmoid's box cannot
bend to is named, and the outcome reaches fits.csv, the terminal, the report and the comparisons' note."""
from __future__ import annotations

import csv
import io

import numpy as np
from rich.console import Console

from rlscale.fit.api import write_outputs
from rlscale.fit.misfit import POWER_LAW_BETTER, STEP_CHANGE, misfit_note
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FITS_CSV, FitResults, FitSettings, RunFit
from rlscale.fit.table import render
from rlscale.report.build import write_report
from rlscale.report.content import load_report
from rlscale.testing.curves import TABLE1, EvalDraw, drawn_curve
from rlscale.testing.misfit_curves import PowerLawSpec, StepSpec, power_law_run, step_run
from rlscale.testing.results_tree import synthetic_plan, write_results

SETTINGS = FitSettings(n_boot=0)


def _draw(evals: int, drift: float, clustered: bool) -> EvalDraw:
    sampling = dict(prompts=100, per_prompt=4) if clustered else dict(samples=400)
    return EvalDraw(drift_sd=drift, drift_phi=0.9, every=16000.0 / (evals - 1), **sampling)


def test_drifting_sigmoid_runs_are_not_noted():
    rng = np.random.default_rng(11)
    fits = []
    for i in range(40):
        draw = _draw((9, 30, 64)[i % 3], (0.005, 0.01, 0.02)[i % 3 - (i // 3) % 3], clustered=i % 2 == 1)
        fits.append(fit_curve(drawn_curve(TABLE1["scalerl"], draw, rng), SETTINGS))
    assert all(f.status == "ok" and f.misfit_p is not None for f in fits)
    assert sum(bool(f.misfit) for f in fits) <= 2  # <= 5 %


def test_a_step_change_is_found_near_its_compute():
    spec = StepSpec(TABLE1["scalerl"], step=0.10, at=0.7)
    draw = _draw(64, 0.01, clustered=True)
    rng = np.random.default_rng(12)
    fits = [fit_curve(step_run(spec, draw, rng), SETTINGS) for _ in range(8)]
    found = [f for f in fits if f.misfit.startswith(STEP_CHANGE)]
    assert len(found) >= 7
    assert all(f.status == "ok" for f in fits)  # still fitted
    for f in found:
        assert abs(float(f.misfit[len(STEP_CHANGE):]) - spec.change_x(draw)) < 0.08 * 16000
        assert f.misfit_p < 0.01


def test_a_power_law_the_box_cannot_follow_is_named():
    # C_mid held at 8k or more: Eq. 1 cannot rise early and keep climbing as the power law does
    settings = FitSettings(n_boot=0, c_mid_grid=[8000.0, 40000.0, 100])
    rng = np.random.default_rng(13)
    fits = [fit_curve(power_law_run(PowerLawSpec(), _draw(64, 0.01, clustered=True), rng), settings) for _ in range(6)]
    assert sum(f.misfit == POWER_LAW_BETTER for f in fits) >= 4
    assert all(f.misfit_llr > 3 for f in fits if f.misfit == POWER_LAW_BETTER)


def test_the_outcome_reaches_fits_csv_the_terminal_and_the_comparisons(tmp_path):
    spec = StepSpec(TABLE1["scalerl"], step=0.10, at=0.7)
    draw = _draw(64, 0.005, clustered=True)
    run = fit_curve(step_run(spec, draw, np.random.default_rng(14), seed=2), SETTINGS)
    clean = fit_curve(drawn_curve(TABLE1["scalerl"], draw, np.random.default_rng(15), variant="base"), SETTINGS)
    assert run.misfit.startswith(STEP_CHANGE) and not clean.misfit
    results = FitResults(settings=SETTINGS, runs=[run, clean])
    write_outputs(results, tmp_path)
    rows = list(csv.DictReader(io.StringIO((tmp_path / FITS_CSV).read_text())))
    assert [r["misfit"] for r in rows] == [run.misfit, ""]
    assert float(rows[0]["misfit_p"]) == run.misfit_p and rows[1]["misfit_llr"] != ""
    assert FitResults.from_json(results.to_json()).runs[0].misfit == run.misfit
    console = Console(file=io.StringIO(), width=200)
    render(results, console)
    text = console.file.getvalue()
    assert "curves that are not sigmoids" in text and f"step s2: {run.misfit}" in text
    assert misfit_note(run) == f"seed 2's curve is not a sigmoid ({run.misfit})"
    assert misfit_note(clean) == "" and misfit_note(RunFit(sweep="", variant="v")) == ""


def test_the_report_flags_the_run_in_its_notes_and_record(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=4, n_sweeps=1, n_loo_sweeps=0, edge_cases=False), n_train=20)
    run = next(r for r in fits.runs if r.status == "ok")
    run.misfit, run.misfit_p, run.misfit_llr = f"{STEP_CHANGE}1.12e+04", 2.5e-4, -0.4
    html = write_report(load_report(root, fits), html=tmp_path / "report.html").html.read_text()
    assert html.count(f"{STEP_CHANGE}1.12e+04") >= 2  # the variant's notes and the run's record
    assert "step-change p 0.00025, power law log-likelihood ratio -0.4" in html
