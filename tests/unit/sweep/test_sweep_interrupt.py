"""``rlscale sweep``'s signal handling (rlscale.sweep.interrupt), with real signals sent to this process: SIGINT
and SIGTERM raise Interrupted once (the exit status 128 + the number), are held while the sweep submits, leave a
SIGINT ignored since the start ignored, and the lanes a sweep starts begin with SIGINT ignored."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from rlscale.sweep.interrupt import Interrupted, SweepSignals, sigint_ignored


@pytest.fixture(autouse=True)
def sigint_handled():
    """Python's own SIGINT handler, whatever this test process inherited (a background job ignores SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def send(signum: int) -> None:
    os.kill(os.getpid(), signum)  # the handler runs before the next bytecode


def test_a_signal_raises_once_and_the_next_are_dropped():
    before = signal.getsignal(signal.SIGTERM)
    with SweepSignals():
        with pytest.raises(Interrupted) as stop:
            send(signal.SIGTERM)
        assert stop.value.name == "SIGTERM" and stop.value.exit_code == 143
        send(signal.SIGINT)  # while the sweep acts on the first: dropped
    assert signal.getsignal(signal.SIGTERM) is before


def test_signals_while_submitting_are_acted_on_after():
    with SweepSignals() as signals:
        with pytest.raises(Interrupted) as stop:
            with signals.deferred():
                send(signal.SIGINT)
                send(signal.SIGTERM)
                done = True  # the block runs to its end
        assert done and stop.value.name == "SIGINT" and stop.value.exit_code == 130


def test_a_sigint_ignored_from_the_start_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with SweepSignals():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        send(signal.SIGINT)


def test_processes_started_for_the_lanes_ignore_sigint():
    probe = [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"]
    with SweepSignals():
        with sigint_ignored():
            lane = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        plain = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        with pytest.raises(Interrupted):  # this process's handler is back
            send(signal.SIGINT)
    assert lane.stdout.strip() == "True" and plain.stdout.strip() == "False"
