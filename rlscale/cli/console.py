"""The consoles the commands print to: the terminal's width on a terminal; in a pipe or a file, 120 columns,
with tables that wrap their headers and notes to fit and never cut a number (rlscale.tables). A ``COLUMNS``
set in the environment wins in both cases."""
from __future__ import annotations

import os

from rich.console import Console

PIPE_WIDTH = 120  # columns of a pipe or a file: tables wrap their headers and notes to fit (rlscale.tables)


def output_console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or stderr), PIPE_WIDTH columns when it is not a terminal."""
    plain = Console(stderr=stderr)
    if plain.is_terminal or os.environ.get("COLUMNS"):
        return plain
    return Console(stderr=stderr, width=PIPE_WIDTH)
