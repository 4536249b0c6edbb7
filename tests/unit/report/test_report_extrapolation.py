"""The extrapolation table of the page and the terminal (``rlscale fit --fit-until``): one row per run that
has a check (fit_until, evals averaged, observed mean, prediction, |error| of the sigmoid and of the power
law, the prediction interval, the carry-forward error, the best method), the runs without one with their
reason, a line with the median and max error over the runs and one per sweep on the intervals and methods."""
from __future__ import annotations

from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
from rich.console import Console

from rlscale.fit.api import fit_results
from rlscale.fit.forecast import best_text
from rlscale.fit.one_run import EXTRAP_EVALS
from rlscale.fit.results import FitResults, FitSettings
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run
from rlscale.report.build import write_report
from rlscale.report.extrapolation import extrapolation_check
from rlscale.report.formatting import ci, num
from rlscale.report.content import load_report
from rlscale.testing.results_tree import synthetic_plan, write_results
from rlscale.report.terminal import print_summary


class Table(HTMLParser):
    """The cells of the body rows of the extrapolation table, the summary line and the note."""

    def __init__(self):
        super().__init__()
        self.rows, self.summary, self.note = [], "", ""
        self._in_table = self._in_cell = False
        self._into = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._in_table = attrs.get("data-table") == "extrapolation"
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag == "td":
            self.rows[-1].append("")
            self._in_cell = True
        elif tag == "p" and attrs.get("data-summary") == "extrapolation":
            self._into = "summary"
        elif tag == "p" and attrs.get("data-note") == "extrapolation":
            self._into = "note"

    def handle_endtag(self, tag):
        self._in_table = self._in_table and tag != "table"
        self._in_cell = self._in_cell and tag != "td"
        self._into = None if tag == "p" else self._into

    def handle_data(self, data):
        if self._in_cell:
            self.rows[-1][-1] += data
        elif self._into:
            setattr(self, self._into, getattr(self, self._into) + data)

    @classmethod
    def of(cls, html: str) -> "Table":
        table = cls()
        table.feed(html)
        table.rows = [row for row in table.rows if row]  # the header row has no td
        return table


def _terminal(report) -> str:
    console = Console(record=True, width=300)
    print_summary(report, console)
    return console.export_text()


def test_each_checked_run_has_a_row_and_the_summary_gives_median_and_max(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=8, n_sweeps=1, n_loo_sweeps=1), n_train=5)
    report = load_report(root, fits)
    checked = [r for r in fits.runs if r.extrap_abs_err is not None]
    assert 0 < len(checked) < len(fits.runs)  # the edge cases (too few points, diverged, no data) have none
    assert all(r.extrap_evals == EXTRAP_EVALS for r in checked)

    page = Table.of(write_report(report, html=tmp_path / "report.html").html.read_text())
    rows, unchecked = page.rows[:len(checked)], page.rows[len(checked):]
    assert len(rows) + len(unchecked) == len(report.runs)  # every run listed, the checked ones first
    by_name = {run.name: run.fit for run in report.runs}
    for row in rows:
        sweep, name, fit_until, evals, last_x, observed, predicted, interval, error, carry, law, best = row
        fit = by_name[name]
        assert (fit_until, evals, last_x) == (num(fit.fit_until, 0), str(EXTRAP_EVALS), num(fit.extrap_x, 0))
        assert (observed, predicted, error) == (num(fit.extrap_observed), num(fit.extrap_predicted),
                                                num(fit.extrap_abs_err))
        assert law == num(fit.power_law.extrap_abs_err)
        assert interval == ci(fit.extrap_lo, fit.extrap_hi) and carry == num(fit.extrap_cf_abs_err)
        assert best == (best_text(fit) or "\u2013")
    assert {row[1] for row in unchecked} == {r.name for r in report.runs if r.fit not in checked}
    assert all(row[2].startswith("no check: ") and len(row) == 3 for row in unchecked)

    errors = [r.extrap_abs_err for r in checked]
    law_errors = [r.power_law.extrap_abs_err for r in checked]
    summary = extrapolation_check(report).summary
    assert (summary.sigmoid.n, summary.evals) == (len(checked), (EXTRAP_EVALS, EXTRAP_EVALS))
    assert np.isclose(summary.sigmoid.median, np.median(errors)) and summary.sigmoid.max == max(errors)
    assert np.isclose(summary.power_law.median, np.median(law_errors)) and summary.power_law.max == max(law_errors)
    line = summary.describe()
    for text in (f"over {len(checked)} runs", f"the mean of the last {EXTRAP_EVALS} evals beyond fit_until",
                 f"median {num(float(np.median(errors)))}, max {num(max(errors))}",
                 f"Power law: median {num(float(np.median(law_errors)))}"):
        assert text in line, text
    assert page.summary == line + "."

    terminal = _terminal(report)
    assert line in terminal and "no extrapolation check (" in terminal
    assert all(num(r.extrap_abs_err) in terminal for r in checked)


def test_fits_made_with_fit_until_fill_the_table(tmp_path):
    """The whole path: runs fitted by ``rlscale fit`` to half their compute, the check read from fits.json."""
    rng = np.random.default_rng(0)
    root = tmp_path / "results"
    for variant in ("scalerl", "batch_512"):
        for seed in (0, 1):
            x, y = synthetic_curve(TABLE1[variant], 40, 0.01, rng)
            write_run(root / "sweep" / f"{variant}_s{seed}", x, y, seed=seed)
    fits = fit_results(root, FitSettings(x="gpu_hours", fit_until_frac=0.5, n_boot=0))
    fits = FitResults.from_json(fits.to_json())  # as the report reads it
    report = load_report(root, fits)
    check = extrapolation_check(report)
    assert len(check.rows) == 4 and not check.unchecked
    for row in check.rows:
        fit = row.run.fit
        assert (row.evals, row.observed, row.predicted, row.error, row.power_law_error) == (
            EXTRAP_EVALS, fit.extrap_observed, fit.extrap_predicted, fit.extrap_abs_err,
            fit.power_law.extrap_abs_err)
        assert row.fit_until < row.last_x and row.error < 0.05
        assert row.lo < row.observed < row.hi and row.best == best_text(fit) != ""
    html = write_report(report, html=tmp_path / "report.html").html.read_text()
    page = Table.of(html)
    assert len(page.rows) == 4 and page.summary.startswith("|error| of the sigmoid over 4 runs")
    assert [name for name, _ in check.forecasts] == ["sweep"]
    assert "sweep: " + check.forecasts[0][1].describe() in _terminal(report)
    assert "50 % of each run" in html and not page.note


def test_fits_without_fit_until_say_so_instead_of_a_table(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=4, n_sweeps=1, edge_cases=False), n_train=5)
    plain = [replace(r, fit_until=None, extrap_x=None, extrap_observed=None, extrap_predicted=None,
                     extrap_abs_err=None, extrap_evals=None) for r in fits.runs]
    report = load_report(root, FitResults(replace(fits.settings, fit_until=None), plain, fits.comparison))
    check = extrapolation_check(report)
    assert (check.rows, check.unchecked, check.summary, check.requested) == ([], [], None, False)
    html = write_report(report, html=tmp_path / "report.html").html.read_text()
    page = Table.of(html)
    assert page.rows == [] and 'data-table="extrapolation"' not in html
    assert page.note.startswith("No extrapolation check")
    assert "extrapolation check" not in _terminal(report).lower()


def test_an_old_fits_json_compared_the_last_eval_alone(tmp_path):
    """fits.json written before extrap_evals existed: the observation is one eval."""
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=3, n_sweeps=1, edge_cases=False), n_train=5)
    old = [replace(r, extrap_evals=None) for r in fits.runs]
    check = extrapolation_check(load_report(root, FitResults(fits.settings, old, fits.comparison)))
    assert {row.evals for row in check.rows} == {1}
    assert "against the last eval beyond fit_until" in check.summary.describe()
