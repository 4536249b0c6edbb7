"""``rlscale sweep --detach``: local workers started with none of the caller's streams.

A local lane's submitit controller is a child process that inherits the caller's standard streams and keeps
them open for as long as its runs train, so ``rlscale sweep ... --detach | tail`` (or ``$(...)``, an ssh
command, a CI step) would wait for every run to end. While a detached sweep starts its workers, file
descriptors 0, 1 and 2 point at the null device; the runs' own output goes to their files (the submitit
logs beside the sweep, metrics and status in the run folders) as always.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

STANDARD_STREAMS = (0, 1, 2)


@contextmanager
def streams_detached() -> Iterator[None]:
    """Point the standard streams at the null device inside the block (children started there inherit it),
    and restore them after."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in STANDARD_STREAMS]
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in STANDARD_STREAMS:
            os.dup2(null, fd)
        yield
    finally:
        for fd, copy in zip(STANDARD_STREAMS, saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)
