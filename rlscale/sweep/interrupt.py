"""How ``rlscale sweep`` takes a signal: SIGINT (Ctrl-C in its terminal) or SIGTERM (``kill``, a job scheduler,
a terminal being closed). What it then does (rlscale.sweep.stop):

- A foreground sweep of local lanes owns its lanes: it stops them with every process they started (as
  ``rlscale cancel`` does), marks their unfinished runs failed with the reason ``interrupted (SIG...)``, and says
  so in one line; rerunning the same command resumes those runs from their last checkpoints.
- A detached sweep's lanes, and a SLURM sweep's jobs, outlive the command by design: the one line says that they
  go on, and how to follow, stop and resume them.
- A signal before anything was submitted stops the command; the line says that nothing runs.

The exit status is 128 + the signal's number (130, 143), and no traceback is printed. A signal that comes while
the sweep submits is acted on once the jobs are recorded in sweep.json (``SweepSignals.deferred``), so no job
runs unrecorded. Local lanes start with SIGINT ignored (``sigint_ignored``): the terminal sends Ctrl-C to the
sweep's whole process group, and a lane's submitit controller and trainers then leave it to the sweep, which
stops them itself, instead of each dying on its own (a KeyboardInterrupt traceback from each).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Dict, Iterator, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached ``rlscale sweep`` (a BaseException, as KeyboardInterrupt is: no ``except
    Exception`` on the way takes it for a failure of what it interrupted)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class SweepSignals:
    """Inside ``with SweepSignals() as signals:``, SIGINT and SIGTERM (unless this process started with them
    ignored, as a shell's background job starts with SIGINT) raise ``Interrupted`` in the main thread, once:
    the signals after it are dropped while the sweep acts on it. Inside ``signals.deferred()`` the first of
    them is kept and raised at the block's end."""

    def __init__(self) -> None:
        self.mode = "raise"
        self.pending: Optional[int] = None
        self.previous: Dict[int, object] = {}

    def __enter__(self) -> "SweepSignals":
        if threading.current_thread() is threading.main_thread():  # only there can handlers be set
            self.previous = {signum: signal.signal(signum, self._handle) for signum in SIGNALS
                             if signal.getsignal(signum) is not signal.SIG_IGN}  # a background job's SIGINT
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.mode == "raise":
            self.mode = "ignore"  # acted on once: a second Ctrl-C never interrupts the stopping of the lanes
            raise Interrupted(signum)
        if self.mode == "defer" and self.pending is None:
            self.pending = signum

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """A signal inside the block raises ``Interrupted`` once the block is over."""
        self.mode = "defer"
        try:
            yield
        finally:
            pending, self.pending = self.pending, None
            self.mode = "raise" if pending is None else "ignore"
            if pending is not None:
                raise Interrupted(pending)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """Processes started inside the block begin with SIGINT ignored (an ignored signal stays ignored across
    fork and exec; Python then installs no KeyboardInterrupt handler). This process ignores it for as long."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
