"""``rlscale report --html`` of 3 sweeps (and a plan) opened in real headless Chromium (Debian ``chromium``),
checked from the page itself over the DevTools protocol (rlscale.testing.chromium): every image loaded, one
table row per run, names and config values with markup shown as text (no script, no dialog), failed fits
listed, no request other than file: or data:, a link to every section, no placeholder in a caption or the
summary, and ranking notes of at most three rendered lines per row.
"""
from __future__ import annotations

import json
from typing import Dict

import pytest
import typer
from typer.testing import CliRunner

from rlscale.cli.plan import plan_command
from rlscale.cli.report import report_command
from rlscale.report.ranking import MAX_NOTE_LINES
from rlscale.testing.chromium import CHROMIUM, PLACEHOLDER, READABILITY, Chromium, readability_problems
from rlscale.testing.results_tree import BUDGET, TRICKY_NOTE, XSS_NAME, synthetic_plan, write_results

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                                                "(installed by scripts/install.sh --test)")]

# Evaluated in the page: what a reader would see.
PAGE_CHECKS = """JSON.stringify({
  images: [...document.images].map(i => ({complete: i.complete, width: i.naturalWidth, src: i.src.slice(0, 5)})),
  tables: [...document.querySelectorAll("table[data-table]")].map(t => ({
    table: t.dataset.table, sweep: t.dataset.sweep || "", rows: t.tBodies[0].rows.length})),
  records: [...document.querySelectorAll("details.run")].map(d => d.dataset.sweep),
  scripts: document.querySelectorAll("script").length,
  text: document.body.innerText,
  configs: [...document.querySelectorAll("pre.config")].map(p => p.textContent),
  resources: performance.getEntriesByType("resource").map(e => e.name),
  """ + READABILITY + """
})"""


def open_page(browser: Chromium, url: str) -> Dict:
    """Load ``url`` in a new tab with the network recorded; return PAGE_CHECKS' answer."""
    return json.loads(browser.evaluate(browser.open(url), PAGE_CHECKS))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A results tree of 3 sweeps (one LOO) with the edge cases, its report, and the page as loaded."""
    root = tmp_path_factory.mktemp("browser")
    results = root / "results"
    plan = synthetic_plan(n_runs=17, n_sweeps=3, n_loo_sweeps=1, edge_cases=True)
    write_results(results, plan, n_train=60)
    for command, args in ((plan_command, ["--budget", str(2 * BUDGET), "--n-boot", "20"]),
                          (report_command, ["--html", "--out", str(root / "report.html")])):
        app = typer.Typer()
        app.command()(command)
        invoked = CliRunner().invoke(app, [str(results), *args])
        assert invoked.exit_code == 0, invoked.output
    browser = Chromium(root / "profile")
    try:
        page = open_page(browser, (root / "report.html").as_uri())
    finally:
        browser.close()
    return plan, page, browser.events


def test_every_image_loaded(rendered):
    plan, page, _ = rendered
    images = page["images"]
    # per sweep at least curves, run panels and diagnostics; the LOO plot; the extrapolation check
    assert len(images) >= 3 * 3 + 2
    assert all(image["complete"] and image["width"] > 0 for image in images), images
    assert {image["src"] for image in images} == {"data:"}


def test_tables_have_one_row_per_run(rendered):
    plan, page, _ = rendered
    per_sweep = {sweep: sum(r.sweep == sweep for r in plan) for sweep in {r.sweep for r in plan}}
    tables = page["tables"]
    for kind in ("ranking", "diagnostics"):
        found = {t["sweep"]: t["rows"] for t in tables if t["table"] == kind}
        assert found == per_sweep, kind
    assert [t["rows"] for t in tables if t["table"] == "extrapolation"] == [len(plan)]
    loo = [t for t in tables if t["table"] == "loo"]
    assert [t["sweep"] for t in loo] == ["loo-0"]
    assert loo[0]["rows"] == sum(r.sweep == "loo-0" and r.fit_status == "ok" for r in plan)
    assert sorted(page["records"]) == sorted(r.sweep for r in plan)


def test_markup_in_names_and_configs_is_text(rendered):
    _, page, events = rendered
    assert page["scripts"] == 0
    assert XSS_NAME in page["text"]
    assert any(TRICKY_NOTE in config for config in page["configs"])
    assert not [e for e in events if e["method"] == "Page.javascriptDialogOpening"]


def test_failed_runs_and_fits_appear_with_their_reason(rendered):
    plan, page, _ = rendered
    for run in plan:
        assert run.variant in page["text"]
        if run.fit_status != "ok":
            assert run.fit_message in page["text"]
        if run.reason:
            assert run.reason in page["text"]


def test_no_request_left_the_machine(rendered):
    _, page, events = rendered
    requested = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    assert requested and requested[0].startswith("file:")
    assert all(url.split(":", 1)[0] in ("file", "data") for url in requested), requested
    assert all(name.split(":", 1)[0] in ("file", "data") for name in page["resources"]), page["resources"]
    assert not [e for e in events if e["method"] == "Network.loadingFailed"]


def test_every_section_has_a_link(rendered):
    _, page, _ = rendered
    assert "plan" in page["sections"]  # the plan's section is there, and linked
    assert sorted(page["nav"]) == sorted(f"#{section}" for section in page["sections"])


def test_no_caption_or_summary_cell_is_a_placeholder(rendered):
    _, page, _ = rendered
    assert page["captions"] and page["summary"]
    for text in page["captions"] + page["summary"]:
        assert not PLACEHOLDER.search(text), text
    assert any("A fixed at" in c or "no run's A is identified" in c for c in page["captions"])  # the LOO caption


def test_ranking_notes_take_at_most_three_lines(rendered):
    plan, page, _ = rendered
    assert len(page["noteLines"]) == len({(r.sweep, r.variant) for r in plan})
    assert max(page["noteLines"]) <= MAX_NOTE_LINES == 3, page["noteLines"]
    assert not [note for note in page["notes"] if "rlscale." in note]  # in words, no module names


def test_a_figure_not_drawn_says_why(rendered):
    _, page, _ = rendered
    assert all(": No " in text and len(text) > 20 for text in page["missing"]), page["missing"]


def test_the_screenshot_checks_pass(rendered):
    _, page, _ = rendered
    assert readability_problems(page) == []
