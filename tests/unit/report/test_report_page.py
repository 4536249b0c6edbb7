"""The HTML page without a browser: self-contained (only data: images and in-page links, a CSP that
forbids fetches), markup in names and configs escaped, failed fits and odd fit records never breaking it,
and the figures drawn the same in worker processes."""
from __future__ import annotations

from html.parser import HTMLParser
from typing import List, Tuple

import matplotlib
import pytest

from rlscale.fit.results import ComparisonRow, FitResults, PowerLawFit, RunFit
from rlscale.report.build import write_report
from rlscale.report.draw import draw_report
from rlscale.report.figures import RunPanels
from rlscale.report.content import load_report
from rlscale.report.plotting import STYLE, run_colors
from rlscale.testing.results_tree import TRICKY_NOTE, XSS_NAME, synthetic_plan, write_results


class Links(HTMLParser):
    """Every tag, and every src/href value, of a page."""

    def __init__(self):
        super().__init__()
        self.tags: List[str] = []
        self.links: List[Tuple[str, str]] = []
        self.csp = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        self.links += [(tag, attrs[key]) for key in ("src", "href") if key in attrs]
        if attrs.get("http-equiv") == "Content-Security-Policy":
            self.csp = attrs["content"]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("page") / "results"
    fits = write_results(root, synthetic_plan(n_runs=10, n_sweeps=2, n_loo_sweeps=1), n_train=30)
    written = write_report(load_report(root, fits), html=root / "report.html")
    return written.html.read_text()


def test_page_is_self_contained(page):
    links = Links()
    links.feed(page)
    assert links.links
    assert all(value.startswith("data:image/png;base64,") if tag == "img" else value.startswith("#")
               for tag, value in links.links), [v[:40] for _, v in links.links]
    assert "default-src 'none'" in links.csp and "script" not in links.tags and "link" not in links.tags


def test_markup_in_names_and_configs_is_escaped(page):
    assert XSS_NAME not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a &amp; b &lt; c &gt; d &#34;double&#34; &#39;single&#39;" in page
    assert TRICKY_NOTE not in page


def test_failed_and_odd_fits_never_break_the_page(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=6, n_sweeps=1, n_loo_sweeps=1), n_train=20)
    odd = [RunFit(sweep="loo-0", variant="ok-but-empty", status="ok"),
           RunFit(sweep="loo-0", variant="crashed", status="failed", message="ValueError: <b>bad</b> & worse"),
           RunFit(sweep="loo-0", variant="no-points", status="ok", A=0.6, B=2.0, C_mid=100.0, R0=0.1,
                  fit_until=50.0, extrap_predicted=0.5, extrap_observed=None,
                  power_law=PowerLawFit(status="failed", message="power law did not converge"))]
    rows = [ComparisonRow(kind="loo", sweep="loo-0", variant="crashed", axis="loss", note="no ok fit"),
            ComparisonRow(kind="rank", sweep="loo-0", variant="crashed", note="no ok fit")]
    report = load_report(root, FitResults(fits.settings, fits.runs + odd, fits.comparison + rows))
    html = write_report(report, html=tmp_path / "report.html", logx=True).html.read_text()
    assert "fit has no parameters" in html and "failed: ValueError: &lt;b&gt;bad&lt;/b&gt; &amp; worse" in html
    assert html.count('<details class="run"') == len(report.runs) == 9


def test_workers_draw_the_same_figures(tmp_path):
    root = tmp_path / "results"
    report = load_report(root, write_results(root, synthetic_plan(n_runs=4, n_sweeps=2, n_loo_sweeps=1,
                                                                  edge_cases=False), n_train=10))
    serial = draw_report(report, [("png", 50)], n_workers=1)
    parallel = draw_report(report, [("png", 50)], n_workers=2)
    assert [(f.sweep, f.kind) for f in serial] == [(f.sweep, f.kind) for f in parallel]
    assert [f.kind for f in serial if f.sweep == "loo-0"] == ["curves", "runs", "loo", "diagnostics"]
    assert serial[-1].kind == "extrapolation" and all(f.data[("png", 50)][:4] == b"\x89PNG" for f in parallel)


def test_run_panels_come_24_to_a_page(tmp_path):
    root = tmp_path / "results"
    report = load_report(root, write_results(root, synthetic_plan(n_runs=30, n_sweeps=1, edge_cases=False),
                                             n_train=5))
    sweep = report.sweeps[0]
    with matplotlib.rc_context(STYLE):
        pages = RunPanels(report.settings, False, len(sweep.runs)).pages(sweep, run_colors(len(sweep.runs)))
        kept = [(page.kind, page.keep_top, sum(ax.get_visible() for ax in page.figure.axes)) for page in pages]
    assert [(kind, visible) for kind, _, visible in kept] == [("runs", 24), ("runs-2", 6)]
    assert kept[1][1] < kept[0][1]  # the second page is cropped to its two rows


def test_verdicts_show_their_intervals_and_the_flags(tmp_path):
    """LOO verdicts with their intervals and reasons, ties, A not identified and eval noise reach the page
    and the terminal; a run whose A is not identified is never the "highest A"."""
    from dataclasses import replace

    from markupsafe import escape
    from rich.console import Console

    from rlscale.report.summary import summarize
    from rlscale.report.terminal import print_summary

    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=6, n_sweeps=1, n_loo_sweeps=1, edge_cases=False), n_train=5)
    loo = [r for r in fits.runs if r.sweep == "loo-0" and r.A is not None]
    top = max(loo, key=lambda r: r.A)
    runs = [replace(r, A_identified=r is not top, A_identified_reason="" if r is not top else
                    "A's interval reaches the edge of its range [0, 1]", eval_se=0.02, eval_samples=512,
                    A_se_within=0.02, eval_prompts=128)
            for r in fits.runs]
    rows = [ComparisonRow(kind="loo", sweep="loo-0", variant=top.variant, axis="precision", dA=0.031, dA_lo=-0.004,
                          dA_hi=0.066, dB=-0.4, dB_lo=-0.9, dB_hi=0.1, interval_source="bootstrap",
                          verdict="unresolved", reason="A not identified", needs="more compute"),
            ComparisonRow(kind="loo", sweep="loo-0", variant="other", axis="loss", dA=-0.061, dA_lo=-0.075,
                          dA_hi=-0.047, dB=0.1, dB_lo=-0.2, dB_hi=0.4, interval_source="paired n=3",
                          verdict="lower ceiling", p_value=0.0012, p_adjusted=0.0048, family_size=4,
                          correction="holm"),
            ComparisonRow(kind="rank", sweep="loo-0", variant=loo[0].variant, rank=1, tie=True, A=0.6)]
    report = load_report(root, FitResults(fits.settings, runs, [c for c in fits.comparison if c.kind != "loo"] + rows))
    summary = next(s for s in summarize(report) if s.name == "loo-0")
    assert summary.best_A.name != top.variant and summary.n_unidentified == 1
    assert summary.noise.flagged
    html = write_report(report, html=tmp_path / "report.html").html.read_text()
    for text in ("unresolved (A not identified): more compute", "+0.031 [-0.004, +0.066]", "-0.061 [-0.075, -0.047]",
                 "paired n=3", "bootstrap", str(escape(summary.noise.describe())), "A not identified: A&#39;s",
                 "GPU-hours (measured)", "1= <span class=\"tie\">tie</span>", "p 0.0012 alone, 0.0048 after Holm over 4",
                 "Leave-one-out: Holm over 4 comparisons (2 reverted axes against the base, each in ceiling and in "
                 "efficiency): any false finding in the table at most 5%"):
        assert text in html, text
    console = Console(record=True, width=250)
    print_summary(report, console)
    terminal = console.export_text()
    for text in ("unresolved (A not identified): more compute", "+0.031 [-0.004, +0.066]", "lower ceiling",
                 summary.noise.describe(), "1=", "GPU-hours (measured)"):
        assert text in terminal, text


class Rows(HTMLParser):
    """The text of each cell of each body row of the tables of one ``data-table`` kind."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind, self.inside, self.cell, self.rows = kind, False, False, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.inside = attrs.get("data-table") == self.kind
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.rows[-1].append("")
            self.cell = True

    def handle_endtag(self, tag):
        self.inside = self.inside and tag != "table"
        self.cell = self.cell and tag != "td"

    def handle_data(self, data):
        if self.cell:
            self.rows[-1][-1] += data


def test_the_ranking_shows_one_row_per_variant_with_its_seeds(tmp_path):
    """Seeds fold into their variant's row: the rank, tie and note once, each seed's A beside the mean."""
    from rich.console import Console

    from rlscale.report.terminal import print_summary

    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=8, n_sweeps=1, seeds=3), n_train=5)
    report = load_report(root, fits)
    variants = {r.variant for r in fits.runs}
    html = write_report(report, html=tmp_path / "report.html").html.read_text()
    rows = Rows("ranking")
    rows.feed(html)
    body = [row for row in rows.rows if row]  # the header row has no td
    assert len(body) == len(variants) == 8 and len(report.runs) == 24
    tied = [row for row in body if row[0].startswith("1=")]
    assert len(tied) == sum(1 for c in fits.comparison if c.kind == "rank" and c.tie) > 1
    for row in tied:
        assert row[-1].count("tie with") == 1 and row[-1].count("mean of 3 seeds") == 1, row
        assert all(f"s{k} " in row[4] for k in range(3)) and "(sd " in row[4], row
    failed = next(row for row in body if row[1].startswith("oom"))
    assert failed[-1] == "no_data: no eval lines"  # said once for its three seeds
    console = Console(record=True, width=400)
    print_summary(report, console)
    terminal = console.export_text()
    assert terminal.count("mean of 3 seeds") == len(tied) and terminal.count("no_data: no eval lines") == 1


@pytest.mark.parametrize("x", ["gpu_hours", "flops"])
def test_figure7_axes_are_labelled_and_span_the_datas_robust_range(tmp_path, x):
    """Figure 7 (App. A.7): F(R_C) = C^B on the curve, so in FLOPs it would reach ~1e45; the plot counts
    compute in a power of ten of the fit's unit, keeps F where R0 < R_C < A, and clips its axis to the
    points' robust range and the lines of slope B."""
    import numpy as np

    from rlscale.fit.results import axis_label
    from rlscale.report.figure7 import Y_LABEL, figure7
    from rlscale.report.figures import loo_figure

    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=6, n_sweeps=1, edge_cases=False, seeds=2), n_train=5, x=x)
    report = load_report(root, fits)
    sweep = report.sweeps[0]
    plot = figure7(sweep, report.settings.x)
    assert plot.scale == (1.0 if x == "gpu_hours" else 1e22)
    assert plot.x_label == (axis_label(x) if x == "gpu_hours" else f"{axis_label(x)}, in units of 1e22")
    lo, hi = plot.ylim
    points = np.concatenate([c.log_f for c in plot.clouds])
    lines = np.concatenate([c.line()[1] for c in plot.clouds])
    assert np.isfinite(points).all() and lo <= lines.min() and lines.max() <= hi
    assert hi - lo < 7  # decades: the lines' spread over the observed compute, not the outliers near A or R0
    assert plot.hidden == np.sum((points < lo) | (points > hi)) < 0.1 * len(points)
    with matplotlib.rc_context(STYLE):
        ax = loo_figure(sweep, report.settings, run_colors(len(sweep.runs))).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (plot.x_label, Y_LABEL)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    np.testing.assert_allclose(np.log10(ax.get_ylim()), plot.ylim)
