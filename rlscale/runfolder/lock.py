"""One writer per folder: ``rlscale sweep`` locks its sweep folder, a run (``rlscale run``, a sweep job,
an sbatch script) locks its run folder, so a second one refuses with one line naming the holder instead
of training the same runs twice into the same files.

The lock is ``fcntl.flock`` on ``<folder>/.rlscale.lock``. The kernel drops it when the holder exits,
however it dies (kill -9 included), so a stale lock of a dead process is never left behind: the next
taker simply gets it, and the holder record it finds (pid, host, command, written after taking the lock
and cleared on release) says whose lock it took over. Linux implements flock on NFS (v3 through NLM,
v4 natively) and on Lustre and GPFS with their default mount options as a byte-range lock that other
hosts see, so the lock holds across the nodes of a cluster sharing the results folder; the file
descriptor is close-on-exec, so job processes started by the holder do not inherit it.
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Optional

from rlscale.runfolder.errors import Refused
from rlscale.runfolder.names import printable
from rlscale.runfolder.process import command_line, host

LOCK_FILE = ".rlscale.lock"
log = logging.getLogger("rlscale.lock")


class FolderBusy(Refused):
    """Another live process holds the folder's lock."""


class FolderLock:
    """``with FolderLock(folder, "sweep"):`` holds ``folder`` (created if missing) or raises
    ``FolderBusy`` naming the holder. ``took_over`` is the record of a holder that died holding it."""

    def __init__(self, folder: Path, what: str):
        self.folder = Path(folder)
        self.what = what
        self.path = self.folder / LOCK_FILE
        self.took_over: Optional[dict] = None
        self._fd: Optional[int] = None

    def __enter__(self) -> "FolderLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read(fd)
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise FolderBusy(f"{self.folder}: {self.what} in use by {describe(holder)}; wait for it to end "
                                 "or stop it") from None
            raise
        self._fd = fd
        self.took_over = _read(fd)
        if self.took_over:
            log.warning("%s: took over the lock of %s, which ended without releasing it", self.folder,
                        describe(self.took_over))
        record = {"pid": os.getpid(), "host": host(), "command": command_line(), "since": time.time(),
                  "what": self.what}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        except OSError as err:  # a full disk: release, and name the file
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._fd = None
            raise type(err)(err.errno, err.strerror, str(self.path)) from None
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # an empty record: released cleanly
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def held_by(folder: Path) -> Optional[str]:
    """Who holds ``folder``'s lock ('pid N on host H (command)'), or None when nobody does. Probes with a
    shared lock for an instant and creates nothing."""
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return describe(_read(fd))
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(fd: int) -> Optional[dict]:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", errors="replace") or "null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def describe(holder: Optional[dict]) -> str:
    """'pid 123 on host h (rlscale sweep conf=loo)', or what is known of it."""
    if not holder:
        return "another process"
    return printable(f"pid {holder.get('pid')} on host {holder.get('host')} ({holder.get('command', '?')})")
