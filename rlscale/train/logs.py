"""The log lines of a run. While a run trains, ``<run>/train.log`` gets every line the process logs (appended: a
resumed run's lines follow the earlier ones; a run refused before it starts writes none) and a progress line (step, latest rewards, ETA) every 30 s and at the
last step; every line, in the file and on the process's own log stream, carries the run's name
(``<sweep>/<variant>``), so the lines of the runs a local lane trains in turn, which share that lane's submitit
log, stay apart."""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator, List

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


@contextlib.contextmanager
def run_logging(run_dir: Path, name: str, max_steps: int, progress_shown: bool) -> Iterator[List[ProgressLines]]:
    """Route the process's log lines into ``run_dir/train.log`` with ``name`` on every line, until the block
    ends; yields the progress sink to hand the trainer. ``progress_shown``: a progress display already shows the
    steps on stderr (``rlscale run``), so the progress lines go to the file only; else (a sweep job) also to
    the job's log."""
    logging.basicConfig(level=logging.INFO)  # stderr, unless the process configured its logging itself
    root = logging.getLogger()
    level = root.level
    root.setLevel(min(level or logging.INFO, logging.INFO))
    formatter = line_format(name)
    kept = [(handler, handler.formatter) for handler in root.handlers]
    file = logging.FileHandler(Path(run_dir) / LOG_FILE, encoding="utf-8", delay=True)  # made at the first line
    file.setFormatter(formatter)
    for handler, _ in kept:
        handler.setFormatter(formatter)
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
