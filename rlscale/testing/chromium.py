"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: no port and no extra package), for the report's browser test and its
screenshots: open a page in a new tab, evaluate an expression in it, capture it as an image."""
from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import List, Optional

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--hide-scrollbars"]


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

    def open(self, url: str, width: int = 1280, height: int = 900) -> str:
        """Load ``url`` in a new tab of ``width`` x ``height`` CSS pixels with the network recorded; return
        the tab's session."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.call("Network.enable", session=session)
        self.call("Page.enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired")
        return session

    def evaluate(self, session: str, expression: str):
        """The value of ``expression`` evaluated in the tab (JSON-serializable values)."""
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
        return answer["result"].get("value")

    def screenshot(self, session: str, path: Path, clip: dict, fmt: str = "png", quality: int = 80) -> Path:
        """The region ``clip`` (x, y, width, height in page pixels) of the tab, as ``fmt`` (png or jpeg)."""
        params = {"format": fmt, "clip": {**clip, "scale": 1}, "captureBeyondViewport": True}
        if fmt == "jpeg":
            params["quality"] = quality
        data = self.call("Page.captureScreenshot", params, session=session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
