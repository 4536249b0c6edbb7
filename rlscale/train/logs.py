"""The log lines of a run. While a run trains, ``<run>/train.log`` gets every line the process logs (appended: a
resumed run's lines follow the earlier ones; a run refused before it starts writes none) and a progress line (step, latest rewards, ETA) every 30 s and at the
last step; every line, in the file and on the process's own log stream, carries the run's name
(``<sweep>/<variant>``), so the lines of the runs a local lane trains in turn, which share that lane's submitit
log, stay apart."""
from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Iterator, List, Optional

from rich.console import Console
from rich.logging import RichHandler

from rlscale.runfolder.names import LOG_FILE
from rlscale.tracking.progress import ProgressLines

PROGRESS_LOGGER = "rlscale.progress"


class _LoggedLines:
    """A text stream whose lines are logged by ``logger`` (what ``ProgressLines`` writes to)."""

    def __init__(self, logger: logging.Logger):
        self.logger = logger

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                self.logger.info(line)

    def flush(self) -> None:
        pass


def line_format(name: str) -> logging.Formatter:
    """``<time> [<name>] <logger> <level> <message>``."""
    return logging.Formatter(f"%(asctime)s [{name.replace('%', '%%')}] %(name)s %(levelname)s %(message)s")


QUIET = {"matplotlib.font_manager": logging.WARNING}  # its INFO lines say nothing about the run


@contextlib.contextmanager
def run_logging(run_dir: Path, name: str, max_steps: int, progress_shown: bool,
                console: Optional[Console] = None) -> Iterator[List[ProgressLines]]:
    """Route the process's log lines into ``run_dir/train.log`` with ``name`` on every line, until the block
    ends; yields the progress sink to hand the trainer. ``progress_shown``: a progress display already shows the
    steps on stderr (``rlscale run``), so the progress lines go to the file only; else (a sweep job) also to
    the job's log. ``console``: the Console of a live progress bar; the lines meant for stderr then go through
    rich's logging handler on it, drawn above the bar instead of into it."""
    root = logging.getLogger()
    drawn = [RichHandler(console=console, show_path=False, markup=False)] if console is not None else []
    hidden = [h for h in root.handlers if drawn and getattr(h, "stream", None) in (sys.stderr, sys.__stderr__)]
    for handler in hidden:
        root.removeHandler(handler)
    for handler in drawn:
        root.addHandler(handler)
    logging.basicConfig(level=logging.INFO)  # stderr, unless the process configured its logging itself
    level = root.level
    root.setLevel(min(level or logging.INFO, logging.INFO))
    quieted = {logger: logging.getLogger(logger).level for logger in QUIET}
    for logger, quiet in QUIET.items():
        logging.getLogger(logger).setLevel(max(quiet, quieted[logger]))
    formatter = line_format(name)
    kept = [(handler, handler.formatter) for handler in root.handlers]
    file = logging.FileHandler(Path(run_dir) / LOG_FILE, encoding="utf-8", delay=True)  # made at the first line
    file.setFormatter(formatter)
    for handler, _ in kept:
        handler.setFormatter(logging.Formatter(f"[{name.replace('%', '%%')}] %(name)s %(message)s")
                             if handler in drawn else formatter)  # rich draws the time and level itself
    root.addHandler(file)
    progress = logging.getLogger(PROGRESS_LOGGER)
    progress.setLevel(logging.INFO)
    progress.propagate = not progress_shown
    if progress_shown:
        progress.addHandler(file)
    try:
        yield [ProgressLines("train", max_steps, stream=_LoggedLines(progress))]
    finally:
        progress.removeHandler(file)
        progress.propagate = True
        root.removeHandler(file)
        file.close()
        for handler, previous in kept:
            handler.setFormatter(previous)
        root.setLevel(level)
        for logger, previous_level in quieted.items():
            logging.getLogger(logger).setLevel(previous_level)
        for handler in drawn:
            root.removeHandler(handler)
        for handler in hidden:
            root.addHandler(handler)
