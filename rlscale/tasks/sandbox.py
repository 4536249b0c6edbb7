"""Run untrusted Python source in a separate, limited process and say whether it exited cleanly.

``run_python(source, limits)`` writes the source to a fresh temporary folder (deleted afterwards) and runs it
there with ``python -I -B`` (isolated mode: no user site, no ``PYTHON*`` variables, no bytecode written) under a
minimal environment whose ``HOME`` and ``TMPDIR`` are that folder and whose proxies point at a closed local port.

What the kernel enforces (resource limits, set soft = hard in the child before the source runs, so the source
cannot raise them without privileges):

- ``RLIMIT_CPU``: CPU seconds (SIGXCPU at the limit, SIGKILL a second later);
- ``RLIMIT_AS``: address space, so a large allocation raises MemoryError;
- ``RLIMIT_FSIZE``: the size of any file written (a write beyond it fails with EFBIG);
- ``RLIMIT_NOFILE``: open file descriptors;
- ``RLIMIT_NPROC``: processes and threads of the user (0: no fork, no thread). The kernel does not apply it to
  root, so a sandbox run by root relies on the audit hook below for this;
- ``RLIMIT_CORE`` 0: no core files.

What the parent enforces: a wall-clock timeout after which the child's whole process group (the child leads a
new one, ``start_new_session``) is killed, and a cap on the bytes of stdout and stderr read (beyond it the group is
killed too).

What an audit hook in the child enforces (``sys.addaudithook``, installed before the source runs and impossible
to remove from Python): it raises PermissionError, and writes ``sandbox blocked EVENT`` to stderr, on sockets
(every ``socket.*`` event), processes (``os.system``, ``os.fork``, ``os.exec``, ``os.posix_spawn``,
``os.spawn``, ``subprocess.Popen``, ``os.kill``), ``ctypes``, ``resource.setrlimit``, opening a file for
writing outside the temporary folder, and removing, renaming, creating or changing a path outside it
(``os.remove``, ``os.rmdir``, ``os.rename``, ``os.mkdir``, ``os.chmod``, ``shutil.rmtree``, ...). The hook is a
best effort within CPython, not a security boundary: native code (an extension module already installed) acts
below it. There is no network namespace (that needs root or user namespaces): the network is closed only by the
hook. Run the sandbox as an unprivileged user for the kernel's process limit and file permissions to apply.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

REASONS = ("ok", "error", "timeout", "memory", "blocked", "output too large", "file too large")
BLOCKED_MARK = "sandbox blocked"
PROGRAM = "main.py"

# The child's first code: limits, the audit hook, then the program file, as __main__ in a fresh namespace.
# argv: temporary folder, CPU seconds, address-space bytes, file bytes, open files, processes.
CHILD = r'''
import os, resource, sys
root = os.path.realpath(sys.argv[1])
cpu, memory, file_size, open_files, processes = map(int, sys.argv[2:7])
for limit, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, file_size),
                     (resource.RLIMIT_NOFILE, open_files), (resource.RLIMIT_NPROC, processes),
                     (resource.RLIMIT_AS, memory)):
    resource.setrlimit(limit, (value, value))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
DENIED = ("socket.", "os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn",
          "subprocess.Popen", "os.kill", "os.killpg", "ctypes.", "resource.setrlimit", "resource.prlimit")
PATHS = ("os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.symlink",
         "os.link", "os.utime", "os.chflags", "os.mkfifo", "os.mknod", "shutil.rmtree", "shutil.move",
         "shutil.copyfile", "shutil.copytree", "shutil.chown")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
def inside(path):
    if isinstance(path, int):
        return True
    real = os.path.realpath(os.fsdecode(path))
    return real == root or real.startswith(root + os.sep)
def writes(mode, flags):
    return bool(set(mode or "") & set("wax+")) or bool((flags or 0) & WRITE_FLAGS)
def hook(event, args):
    if event.startswith(DENIED):
        denied = True
    elif event == "open":
        denied = writes(args[1], args[2]) and not inside(args[0])
    elif event in PATHS:
        denied = not all(inside(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))
    else:
        return
    if denied:
        os.write(2, b"sandbox blocked " + event.encode() + b"\n")
        raise PermissionError("sandbox blocked " + event)
program = os.path.join(root, "main.py")
with open(program, encoding="utf-8") as fh:
    source = fh.read()
sys.argv = [program]
sys.addaudithook(hook)
exec(compile(source, program, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
'''


@dataclass(frozen=True)
class Limits:
    """The limits of one run. cpu_s: CPU seconds (kernel); wall_s: seconds before the process group is killed;
    memory_bytes: address space (kernel); file_bytes: largest file written (kernel); open_files: descriptors
    (kernel); processes: the user's processes and threads (kernel, not for root); output_bytes: bytes of stdout
    and of stderr read, each."""

    cpu_s: int = 2
    wall_s: float = 5.0
    memory_bytes: int = 512 * 2**20
    file_bytes: int = 2**20
    open_files: int = 32
    processes: int = 0
    output_bytes: int = 2**16

    def __post_init__(self):
        for name in ("cpu_s", "wall_s", "memory_bytes", "file_bytes", "open_files", "output_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"sandbox limit {name}={getattr(self, name)}: must be positive")
        if self.processes < 0:
            raise ValueError(f"sandbox limit processes={self.processes}: must be 0 or more")


@dataclass(frozen=True)
class SandboxResult:
    """How a run ended. passed: it exited with status 0 within every limit. reason: one of ``REASONS``.
    returncode: the exit status (negative: the signal), None when the parent killed it. stdout, stderr: what was
    read, at most ``Limits.output_bytes`` each, decoded with replacement."""

    passed: bool
    reason: str
    returncode: Optional[int]
    stdout: str
    stderr: str


def _read_capped(proc: subprocess.Popen, cap: int, deadline: float) -> Tuple[bytes, bytes, Optional[str]]:
    """stdout and stderr until both close, or the reason to stop early: "timeout" at the deadline, "output too
    large" once either passes ``cap`` bytes."""
    buffers = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    stop = None
    with selectors.DefaultSelector() as selector:
        for stream in buffers:
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and stop is None:
            left = deadline - time.monotonic()
            if left <= 0:
                stop = "timeout"
                break
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.fileobj] += chunk
                if len(buffers[key.fileobj]) > cap:
                    stop = "output too large"
    return bytes(buffers[proc.stdout][:cap]), bytes(buffers[proc.stderr][:cap]), stop


def _reason(returncode: int, stderr: str) -> str:
    """The reason a finished run gives, from its exit status and stderr."""
    if returncode == 0:
        return "ok"
    if BLOCKED_MARK in stderr:
        return "blocked"
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout"
    if "File too large" in stderr:  # Python ignores SIGXFSZ, so the write fails with EFBIG
        return "file too large"
    if "MemoryError" in stderr:
        return "memory"
    return "error"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_python(source: str, limits: Limits = Limits()) -> SandboxResult:
    """Run ``source`` as ``__main__`` in the sandbox (see the module docstring) and report how it ended; the
    temporary folder and every process the run started are gone when this returns."""
    with tempfile.TemporaryDirectory(prefix="rlscale-sandbox-") as folder:
        Path(folder, PROGRAM).write_text(source, encoding="utf-8")
        closed = "http://127.0.0.1:9"
        env = {"PATH": os.defpath, "HOME": folder, "TMPDIR": folder, "LANG": "C.UTF-8",
               "http_proxy": closed, "https_proxy": closed, "all_proxy": closed, "no_proxy": ""}
        argv = [sys.executable, "-I", "-B", "-c", CHILD, folder, str(limits.cpu_s), str(limits.memory_bytes),
                str(limits.file_bytes), str(limits.open_files), str(limits.processes)]
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + limits.wall_s
            out, err, stop = _read_capped(proc, limits.output_bytes, deadline)
            if stop is None:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stop = "timeout"
        finally:
            _kill_group(proc.pid)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if stop is not None:
        return SandboxResult(False, stop, None, stdout, stderr)
    reason = _reason(proc.returncode, stderr)
    return SandboxResult(reason == "ok", reason, proc.returncode, stdout, stderr)
