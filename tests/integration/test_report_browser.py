"""``rlscale report --html`` of 3 sweeps opened in real headless Chromium (Debian
``chromium``), checked from the page itself over the DevTools protocol (``--remote-debugging-pipe``, so no
port and no extra package): every image loaded, one table row per run, names and config values with
markup shown as text (no script, no dialog), failed fits listed, and no request other than file: or data:.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import typer
from typer.testing import CliRunner

from rlscale.cli.report import report_command
from rlscale.testing.results_tree import TRICKY_NOTE, XSS_NAME, synthetic_plan, write_results

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]

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
})"""


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fd 3: commands in, fd 4: replies
    out, each message JSON ended by a NUL byte)."""

    def __init__(self, profile: Path):
        commands_r, self._commands = os.pipe()
        self._replies, replies_w = os.pipe()

        def child_fds() -> None:  # dup first: os.pipe() may have returned 3 or 4 itself
            a, b = os.dup(commands_r), os.dup(replies_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_r)
        os.close(replies_w)
        self.events: List[dict] = []
        self._buffer = b""
        self._id = 0

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        reply = self._read(lambda m: m.get("id") == self._id)
        assert "error" not in reply, reply
        return reply["result"]

    def wait_event(self, method: str) -> dict:
        return self._read(lambda m: m.get("method") == method)

    def _read(self, wanted, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            ready, _, _ = select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self._buffer += chunk

    def close(self) -> None:
        try:
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.process.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)


def open_page(browser: Chromium, url: str) -> Dict:
    """Load ``url`` in a new tab with the network recorded; return PAGE_CHECKS' answer."""
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.call("Network.enable", session=session)
    browser.call("Page.enable", session=session)
    browser.call("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired")
    answer = browser.call("Runtime.evaluate", {"expression": PAGE_CHECKS, "returnByValue": True}, session=session)
    return json.loads(answer["result"]["value"])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A results tree of 3 sweeps (one LOO) with the edge cases, its report, and the page as loaded."""
    root = tmp_path_factory.mktemp("browser")
    results = root / "results"
    plan = synthetic_plan(n_runs=17, n_sweeps=3, n_loo_sweeps=1, edge_cases=True)
    write_results(results, plan, n_train=60)
    app = typer.Typer()
    app.command()(report_command)
    invoked = CliRunner().invoke(app, [str(results), "--html", "--out", str(root / "report.html")])
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
