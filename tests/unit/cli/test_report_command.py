"""``rlscale report`` as a user runs it: the terminal summary, --html with --out, --figures in each format,
refitting through the real fitter (rlscale.fit.api) when fits.json is missing or older than the metrics,
and the exit codes of bad arguments."""
from __future__ import annotations

import os
import time

import pytest
import typer
from typer.testing import CliRunner

from rlscale.fit.results import FITS_JSON, FitResults
from rlscale.cli.report import report_command
from rlscale.report.inputs import stale_reason
from rlscale.testing.results_tree import XSS_NAME, synthetic_plan, write_results


def _invoke(*args):
    app = typer.Typer()
    app.command()(report_command)
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "results"
    write_results(root, synthetic_plan(n_runs=10, n_sweeps=2, n_loo_sweeps=1), n_train=20)
    return root


def test_terminal_summary_without_html(results):
    out = _invoke(results)
    assert out.exit_code == 0, out.output
    for text in ("loo-0", "grid-1", "highest A", XSS_NAME, "too_few_points", "CUDA out of memory at step 12"):
        assert text in out.output
    assert not (results / "report.html").exists()


def test_html_goes_to_out_and_figures_to_files(results, tmp_path):
    out = _invoke(results, "--out", tmp_path / "page.html", "--figures", tmp_path / "figs", "--format", "svg",
                  "--logx")
    assert out.exit_code == 0, out.output
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == ["extrapolation.svg", "grid-1-curves.svg", "grid-1-diagnostics.svg", "grid-1-runs.svg",
                     "loo-0-curves.svg", "loo-0-diagnostics.svg", "loo-0-loo.svg", "loo-0-runs.svg"]
    assert (tmp_path / "figs" / "loo-0-loo.svg").read_text().lstrip().startswith("<?xml")


def test_pdf_figures_for_papers(tmp_path):
    root = tmp_path / "results"
    write_results(root, synthetic_plan(n_runs=2, n_sweeps=1, edge_cases=False), n_train=5)
    out = _invoke(root, "--figures", tmp_path / "figs", "--format", "pdf")
    assert out.exit_code == 0, out.output
    files = list((tmp_path / "figs").glob("*.pdf"))
    assert len(files) == 5 and all(p.read_bytes().startswith(b"%PDF") for p in files)


def test_bad_arguments_exit_2(results, tmp_path):
    assert _invoke(results, "--figures", tmp_path, "--format", "bmp").exit_code == 2
    assert _invoke(tmp_path / "missing", "--html").exit_code == 2


def test_a_folder_without_runs_is_one_line_and_no_page(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _invoke(empty, "--html")
    assert result.exit_code == 1 and "error: no runs under" in result.output
    assert list(empty.iterdir()) == []


def test_missing_or_stale_fits_are_refitted_by_the_fitter(results):
    """Goes through rlscale.fit.api (fit_results, write_outputs): no fits.json, then metrics newer."""
    (results / FITS_JSON).unlink()
    assert stale_reason(results) == f"{FITS_JSON} is missing"
    out = _invoke(results)
    assert out.exit_code == 0, out.output
    assert "running rlscale fit" in out.output and "ranking by A" in out.output
    fits = FitResults.load(results / FITS_JSON)
    assert len(fits.runs) == 10 and {r.status for r in fits.runs} >= {"ok", "no_data"}
    assert stale_reason(results) is None
    newer = time.time() + 5
    metrics = next(results.glob("loo-0/*/metrics.jsonl"))
    os.utime(metrics, (newer, newer))
    assert stale_reason(results).startswith(f"{FITS_JSON} is older than 1 metrics file")
    assert "running rlscale fit" in _invoke(results).output
