"""The consoles the commands print to: the terminal's width on a terminal; in a pipe or a file, wide enough
that no table cell wraps or is cut, so a log keeps each row of a ranking or LOO table on one line. A
``COLUMNS`` set in the environment wins in both cases."""
from __future__ import annotations

import os

from rich.console import Console

PIPE_WIDTH = 1000  # columns of a pipe or a file: wider than any row the commands print


def output_console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr), as wide as a pipe needs when it is not a terminal."""
    plain = Console(stderr=stderr)
    if plain.is_terminal or os.environ.get("COLUMNS"):
        return plain
    return Console(stderr=stderr, width=PIPE_WIDTH)
