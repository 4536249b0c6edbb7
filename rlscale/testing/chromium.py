"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port and no extra package), for the report's browser test and its
screenshots: open a page in a new tab, evaluate an expression in it, capture it as an image; and what a
reader of the report sees of its readability (READABILITY, readability_problems)."""
from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
from pathlib import Path
import re
from typing import List, Optional

from rlscale.report.ranking import MAX_NOTE_LINES

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--hide-scrollbars"]

# Fields of a JavaScript object literal, evaluated in a report page: its navigation and sections, the
# rendered lines and text of each ranking note, the captions, the summary's cells, the figures not drawn.
READABILITY = """
  nav: [...document.querySelectorAll("nav a")].map(a => a.getAttribute("href")),
  sections: [...document.querySelectorAll("main > section")].map(s => s.id),
  noteLines: [...document.querySelectorAll("table[data-table=ranking] td.notes")].map(td =>
    [...td.querySelectorAll(".note-line")].reduce((n, line) =>
      n + Math.round(line.getBoundingClientRect().height / parseFloat(getComputedStyle(line).lineHeight)), 0)),
  notes: [...document.querySelectorAll("table[data-table=ranking] td.notes")].map(td => td.innerText),
  captions: [...document.querySelectorAll("p.note, p.flag, p.summary, h3, h4")].map(e => e.innerText),
  summary: [...document.querySelectorAll("table[data-table=summary] td")].map(td => td.innerText.trim()),
  missing: [...document.querySelectorAll("[data-missing]")].map(e => e.dataset.missing + ": " + e.innerText),
"""
# What a value left unfilled looks like: a lone dash ("runs -;"), "+--", a Python None/nan, a template brace.
PLACEHOLDER = re.compile(r"(^|\s)[-\u2014](;|,|$)|\+--|\bNone\b|\bnan\b|undefined|\{\{")


def readability_problems(page: dict) -> List[str]:
    """What READABILITY's answer shows wrong: a section without a link, a placeholder in a caption or the
    summary, a ranking note over MAX_NOTE_LINES rendered lines or naming a module, a figure left out without
    a reason; [] when none."""
    problems = []
    if sorted(page["nav"]) != sorted(f"#{section}" for section in page["sections"]):
        problems.append(f"navigation {page['nav']} does not link every section {page['sections']}")
    problems += [f"placeholder: {text!r}" for text in page["captions"] + page["summary"] if PLACEHOLDER.search(text)]
    problems += [f"a note of {n} lines" for n in page["noteLines"] if n > MAX_NOTE_LINES]
    problems += [f"a note names a module: {note!r}" for note in page["notes"] if "rlscale." in note]
    problems += [f"a figure left out without a reason: {m!r}" for m in page["missing"] if ": No " not in m]
    return problems


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

    def call(self, method: str, params: Optional[dict] = None, tab: Optional[str] = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if tab:
            message["sessionId"] = tab
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

    def open(self, url: str, width: int = 1280, height: int = 900) -> str:
        """Load ``url`` in a new tab of ``width`` x ``height`` CSS pixels with the network recorded; return
        the tab's id for ``call``."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        tab = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, tab=tab)
        self.call("Network.enable", tab=tab)
        self.call("Page.enable", tab=tab)
        self.call("Page.navigate", {"url": url}, tab=tab)
        self.wait_event("Page.loadEventFired")
        return tab

    def evaluate(self, tab: str, expression: str):
        """The value of ``expression`` evaluated in the tab (JSON-serializable values)."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, tab=tab)
        return answer["result"].get("value")

    def screenshot(self, tab: str, path: Path, clip: dict, fmt: str = "png", quality: int = 80) -> Path:
        """The region ``clip`` (x, y, width, height in page pixels) of the tab, as ``fmt`` (png or jpeg)."""
        params = {"format": fmt, "clip": {**clip, "scale": 1}, "captureBeyondViewport": True}
        if fmt == "jpeg":
            params["quality"] = quality
        data = self.call("Page.captureScreenshot", params, tab=tab)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
