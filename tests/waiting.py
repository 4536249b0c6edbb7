"""Polling helper shared by the tests that watch other processes."""
from __future__ import annotations

import time

import pytest


def wait_for(condition, what: str, timeout: float = 120.0, poll_s: float = 0.01) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll_s)
