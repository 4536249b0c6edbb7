"""Who runs this process, and whether a process recorded earlier (pid, host, start time) still lives."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Optional


def host() -> str:
    return socket.gethostname()


def command_line() -> str:
    """This process's command, shortened to one line of at most 200 characters."""
    text = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else sys.executable
    return " ".join(text.split())[:200]


def _started(pid: int) -> Optional[float]:
    """The process's start time (epoch seconds) from /proc, or None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def pid_alive(pid: int, since: Optional[float] = None) -> bool:
    """Whether process ``pid`` of this host lives. With ``since`` (when the process recorded itself), a
    process started after that time is another one that reused the pid, so the recorded one is gone."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        pass
    if _zombie(pid):
        return False
    started = _started(pid)
    return since is None or started is None or started <= since + 1.0
