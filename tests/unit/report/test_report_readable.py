"""What the report writes in words: a ranking row's note in at most three lines, one short reason per seed
said once, no module names; the LOO caption and the summary filled from the data (the fixed A, the band on
dB, the eval SE), or saying in words why a value is missing; a figure that cannot be drawn says why; panel
titles in a run's colour readable on white."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from matplotlib.colors import to_rgb

from rlscale.fit.results import ComparisonRow, FitSettings, RunFit
from rlscale.fit.table import loo_caption
from rlscale.report.build import write_report
from rlscale.report.content import ReportData, RunView, Series, SweepView, VariantView, load_report
from rlscale.report.figure7 import figure7_missing
from rlscale.report.plotting import run_colors, text_color
from rlscale.report.ranking import MAX_NOTE_LINES, notes
from rlscale.report.summary import summarize
from rlscale.testing.results_tree import synthetic_plan, write_results

POOLED = "residual variance of 3 degrees of freedom raised to the variant's pooled level (x2.3; rlscale.fit.pooled)"
BINNED = "40 evals in the window, fitted as the means of 20 groups of consecutive evals (rlscale.fit.binning)"


def _run(seed: int, identified: bool = True, message: str = "", eval_se=0.03) -> RunView:
    fit = RunFit(sweep="s", variant="v", seed=seed, status="ok", A=0.8, B=2.0, C_mid=1e3, R0=0.1,
                 A_identified=identified, eval_se=eval_se, message=message,
                 A_identified_reason="" if identified else "A's interval reaches the edge of its range [0, 1]")
    return RunView(f"run-{seed}", "s", "v", f"v (seed {seed})", None, fit, "done", "", "", Series(), {})


def test_a_rows_note_is_three_short_lines_without_module_names():
    row = ComparisonRow(kind="rank", sweep="s", variant="v", rank=2, dA=-0.03, dA_lo=-0.05, dA_hi=-0.01,
                        interval_source="paired n=3", note="3 seeds; dA vs base: beyond the margin, resolved",
                        margin_B=0.33, eval_share=0.5)
    runs = [_run(0, message=f"{POOLED}; {BINNED}"), _run(1, False, message=f"{POOLED}; {BINNED}"),
            _run(2, message=f"{POOLED}; {BINNED}")]
    lines = notes(VariantView("v", runs, row))
    assert len(lines) == MAX_NOTE_LINES == 3
    assert lines[0].text.startswith("\u0394A -0.030 [-0.050, -0.010] (paired n=3)")
    assert "margin_B 0.33" in lines[0].detail and "margin_B" not in lines[0].text
    assert lines[1].text == row.note
    seeds = lines[2].text
    assert "rlscale." not in seeds and seeds.count("pooled level") == 1  # s0 and s2 share it: said once
    assert seeds == ("s0, s2: residual variance of 3 degrees of freedom raised to the variant's pooled level; "
                     "s1: A not identified: A's interval reaches the edge of its range [0, 1]")
    assert lines[2].flag and "rlscale.fit.binning" in lines[2].detail  # the full messages stay in the tooltip


def test_seeds_that_agree_are_not_named():
    lines = notes(VariantView("v", [_run(0, message=POOLED), _run(1, message=POOLED)], None))
    assert [line.text for line in lines] == ["residual variance of 3 degrees of freedom raised to the variant's "
                                             "pooled level"]


def test_the_summary_shows_the_eval_se_when_no_a_is_identified():
    runs = [_run(0, False, eval_se=0.02), _run(1, False, eval_se=0.04)]
    report = ReportData(results_dir=None, settings=FitSettings(), sweeps=[SweepView("s", runs, [], [])])
    summary = summarize(report)[0]
    assert summary.noise is None and summary.eval_se_text == "0.0300"
    assert summary.best_A is None and summary.no_best_A == "no A identified"
    unlogged = summarize(ReportData(None, FitSettings(), [SweepView("s", [_run(0, eval_se=None),
                                                                          _run(1, eval_se=float("nan"))], [], [])]))[0]
    assert unlogged.eval_se_text == "not logged"


def test_the_loo_caption_is_filled_from_its_rows():
    settings = FitSettings()
    rows = [ComparisonRow(kind="loo", sweep="s", variant="base", A_fixed=0.8724, margin_B=0.332),
            ComparisonRow(kind="loo", sweep="s", variant="v", axis="loss", A_fixed=0.8724, margin_B=0.332)]
    caption = loo_caption(rows, settings)
    assert "A fixed at 0.872, the mean of the identified runs" in caption
    assert f"dA inside +-{settings.margin:g} and dB inside +-0.33 ({settings.margin_b:.0%} of the base's B)" in caption
    none = loo_caption([ComparisonRow(kind="loo", sweep="s", variant="base")], settings)
    assert "no run's A is identified, so no B at a fixed A" in none and "the base has no B at the fixed A" in none
    for text in (caption, none):
        assert " - " not in text and "+--" not in text and not text.rstrip().endswith("-")


def test_a_figure_that_cannot_be_drawn_says_why(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=6, n_sweeps=1, n_loo_sweeps=1, edge_cases=False), n_train=5)
    fits.comparison = [replace(c, A_fixed=None, B_fixed=None) if c.kind == "loo" else c for c in fits.comparison]
    report = load_report(root, fits)
    assert figure7_missing(report.sweeps[0]) == "no run's A is identified, so there is no common A to refit B at"
    html = write_report(report, html=tmp_path / "report.html").html.read_text()
    assert html.count('data-missing="loo"') == 1
    assert "No Figure 7 style plot of loo-0: no run&#39;s A is identified" in html


def test_panel_titles_of_pale_run_colours_are_darkened_to_readable_text():
    colors = run_colors(20)  # tab20: every second colour is a pale shade
    darkened = [text_color(color) for color in colors]
    for color in darkened:
        rgb = np.array(to_rgb(color))
        linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        assert 1.05 / (linear @ [0.2126, 0.7152, 0.0722] + 0.05) >= 4.5, color
    assert darkened[0] == colors[0] and darkened[1] != colors[1]  # a dark colour is kept, a pale one darkened
