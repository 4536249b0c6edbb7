"""The progress of a long command (``rlscale fit``, ``rlscale report`` when it refits): on a terminal a rich bar
(the phase, runs done of all, elapsed time); in a pipe or a log, where a bar draws nothing, a line at least every
``every_s`` seconds (the phase, runs done of all, seconds so far), whether the work reports a run or sits in one
long phase (reading the runs, comparing the variants): a heartbeat thread checks the clock every second."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn,
                           TimeElapsedColumn)

EVERY_S = 10.0  # most seconds between two lines in a pipe
HEARTBEAT_S = 1.0


class WorkProgress:
    """Where a command reports its phase (``phase``) and its count (``count``); ``tick`` prints the pipe's line
    when ``every_s`` have passed since the last line printed (any line: ``say`` counts too). ``clock``: the
    seconds it measures with (a fake one in tests)."""

    def __init__(self, console: Console, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.console, self.every_s, self.clock = console, every_s, clock
        self.started = self.printed = clock()
        self.text, self.done, self.total = "", 0, 0
        self.bar: Optional[Progress] = None
        self._task: Optional[TaskID] = None
        self._lock = threading.RLock()

    def draw_on(self, bar: Progress) -> None:
        """Show the phase and the count in ``bar`` (a terminal's) instead of printing lines."""
        self.bar, self._task = bar, bar.add_task("", total=None)

    def phase(self, text: str) -> None:
        """A new phase: its text, and no count until ``count`` gives one."""
        with self._lock:
            self.text, self.done, self.total = text, 0, 0
            if self.bar is not None:
                self.bar.update(self._task, description=text, completed=0, total=None)
            self.tick()

    def count(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total
            if self.bar is not None:
                self.bar.update(self._task, completed=done, total=total)
            self.tick()

    def tick(self) -> None:
        """In a pipe, the line of the phase once ``every_s`` have passed since the last line."""
        with self._lock:
            now = self.clock()
            if self.bar is None and now - self.printed >= self.every_s:
                self._print(self.line(now), now)

    def line(self, now: float) -> str:
        """``fitting: run 120/300 (20 s)`` or ``comparing the variants (35 s)``."""
        counted = f": run {self.done}/{self.total}" if self.total else ""
        return f"{self.text}{counted} ({now - self.started:.0f} s)"

    def say(self, text: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        with self._lock:
            self._print(text, self.clock())

    def _print(self, text: str, now: float) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.printed = now

    def elapsed(self) -> float:
        return self.clock() - self.started


@contextmanager
def work_progress(console: Console, every_s: float = EVERY_S) -> Iterator[WorkProgress]:
    """A ``WorkProgress`` on ``console`` until the block ends: a bar when the console is a terminal, else the
    heartbeat thread that lets ``tick`` print through a long phase."""
    progress = WorkProgress(console, every_s)
    if console.is_terminal:
        bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=console, transient=True)
        progress.draw_on(bar)
        with bar:
            yield progress
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            progress.tick()

    heart = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
    heart.start()
    try:
        yield progress
    finally:
        stop.set()
        heart.join()
