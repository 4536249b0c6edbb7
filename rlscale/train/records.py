"""How a run folder was made, recorded beside its config as Hydra records a job in ``.hydra/``:
``overrides.yaml`` (the run's Hydra overrides, a list of strings, Hydra's ``overrides.yaml``) and ``versions.yaml``
(the command line and working directory, rlscale's version and the git commit of its source tree when it is a
clone, Python's version and those of torch, transformers, vLLM and DeepSpeed, ``not installed`` for one that is
absent). Both are written atomically each time the run is prepared (with its config.yaml), so they describe the
latest command that prepared it; every start of the run also logs the versions in its train.log
(``versions_line``), which keeps the history."""
from __future__ import annotations

import functools
import os
import shlex
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, Optional, Sequence

import yaml

from rlscale.runfolder.atomic import atomic_write_text

OVERRIDES_FILE = "overrides.yaml"
VERSIONS_FILE = "versions.yaml"
PACKAGES = ("torch", "transformers", "vllm", "deepspeed")
ABSENT = "not installed"


def package_version(name: str) -> str:
    """The installed version of distribution ``name`` (read from its metadata, nothing imported), or ``ABSENT``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ABSENT


def git_commit(folder: Path) -> Optional[str]:
    """The commit checked out in ``folder``'s git work tree (``+dirty`` when tracked files differ from it), or None
    outside one or without git."""
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(folder), "diff", "--quiet", "HEAD", "--"], capture_output=True,
                               timeout=30).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def installed() -> Dict[str, Optional[str]]:
    """rlscale's version and git commit, and the versions of Python and ``PACKAGES``: asked once per process (the
    same for every run a sweep prepares)."""
    import rlscale

    source = Path(rlscale.__file__).resolve().parent.parent
    return {"rlscale": rlscale.__version__, "git_commit": git_commit(source) if (source / ".git").exists() else None,
            "python": platform.python_version(), **{name: package_version(name) for name in PACKAGES}}


def versions(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    """What ``versions.yaml`` holds for a run started by the command line ``argv`` from the working directory."""
    program = ["rlscale"] if "rlscale" in Path(argv[0]).as_posix() else list(argv[:1])  # the script or -m module
    return {"command": shlex.join([*program, *argv[1:]]), "cwd": os.getcwd(), **installed()}


def versions_line() -> str:
    """The versions of ``versions`` (this process's command line) on one line, for the run's log."""
    found = installed()
    commit = f" (git {found['git_commit']})" if found["git_commit"] else ""
    return f"rlscale {found['rlscale']}{commit}, python {found['python']}, " + ", ".join(
        f"{name} {found[name]}" for name in PACKAGES)


def write_records(run_dir: Path, overrides: Sequence[str], argv: Optional[Sequence[str]] = None) -> None:
    """Write ``overrides.yaml`` and ``versions.yaml`` into ``run_dir`` (``argv``: this process's by default), each
    only where its text changes."""
    texts = {OVERRIDES_FILE: yaml.safe_dump(list(overrides), default_flow_style=False),
             VERSIONS_FILE: yaml.safe_dump(versions(sys.argv if argv is None else argv), sort_keys=False)}
    for name, text in texts.items():
        path = Path(run_dir) / name
        if not path.is_file() or path.read_text() != text:  # the same command again touches nothing
            atomic_write_text(path, text)
