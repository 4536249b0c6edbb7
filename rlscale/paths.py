"""Where the Hydra tree, sweep specs, sbatch template and reference pages are found.

They live at the top of the repository (``conf/``, ``sweeps/``, ``slurm/run.sbatch.tmpl``, ``docs/*.md``), and the
build ships them inside the package as ``rlscale.conf``, ``rlscale.sweeps``, ``rlscale.slurm`` and
``rlscale.docs`` (pyproject.toml).
``shipped_dir`` finds each the same way from an install and from a clone: the import system's package where it
belongs to this ``rlscale`` (a wheel install, a PEP 660 editable install), else the folder beside the package
(a clone on ``PYTHONPATH``, an egg-link editable install). The shipped folders come last; before them, the
user's: each folder of ``RLSCALE_CONFIG_PATH`` (``--config-dir`` sets it; several folders separated by
``os.pathsep``) holds Hydra config groups and root configs, and a ``sweeps/`` subfolder of specs; the working
directory's ``sweeps/`` is searched for specs after those."""
from __future__ import annotations

import errno
import os
from importlib import resources, util
from pathlib import Path
from typing import List

PACKAGE_DIR = Path(str(resources.files("rlscale")))  # pip installs unpack wheels, so this is a folder


def shipped_dir(name: str) -> Path:
    """The shipped folder ``name`` (``conf``, ``sweeps``, ``slurm``, ``docs``) of this ``rlscale``.

    The package ``rlscale.<name>`` where the import system finds it inside this package (a wheel install:
    ``site-packages/rlscale/<name>``) or beside it (a PEP 660 editable install maps it to the repository's
    top-level folder); otherwise, or where the import system finds another checkout's folder (an editable
    install of one clone while another is on ``PYTHONPATH``), the folder ``<name>/`` beside the package."""
    beside = PACKAGE_DIR.parent / name
    try:
        spec = util.find_spec(f"rlscale.{name}")
    except ImportError:
        spec = None
    mine = {(PACKAGE_DIR / name).resolve(), beside.resolve()}
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if Path(folder).resolve() in mine and Path(folder).is_dir():
            return Path(folder)
    return beside


CONF_DIR = shipped_dir("conf")
SWEEPS_DIR = shipped_dir("sweeps")
SLURM_DIR = shipped_dir("slurm")
DOCS_DIR = shipped_dir("docs")
CONFIG_PATH_ENV = "RLSCALE_CONFIG_PATH"
CONFIG_DIR_HELP = ("a folder of your own Hydra configs (groups such as loss/, root configs) and sweeps/ specs, "
                   "searched before the packaged ones")


def user_config_dirs() -> List[Path]:
    """The folders of ``RLSCALE_CONFIG_PATH``, in order (missing ones are an error where they are set)."""
    return [Path(p).expanduser().resolve() for p in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep) if p]


def add_config_dir(folder: Path) -> None:
    """Put ``folder`` first on the search path of this process and of the jobs it starts; a folder that does
    not exist is refused (NotADirectoryError naming it), so a typo never silently falls back to the packaged
    configs."""
    if not Path(folder).is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "no such folder (--config-dir)", str(folder))
    os.environ[CONFIG_PATH_ENV] = os.pathsep.join(str(p) for p in [Path(folder).resolve(), *user_config_dirs()])


def config_dirs() -> List[Path]:
    """Folders searched for Hydra configs, first match wins: the user's, then the packaged ``conf``."""
    return _unique([*user_config_dirs(), CONF_DIR])


def sweep_dirs() -> List[Path]:
    """Folders searched for ``conf=NAME`` sweep specs: each user folder's ``sweeps/``, the working
    directory's ``sweeps/``, then the packaged specs."""
    return _unique([*(d / "sweeps" for d in user_config_dirs()), Path.cwd() / "sweeps", SWEEPS_DIR])


def _unique(folders: List[Path]) -> List[Path]:
    seen, out = set(), []
    for folder in folders:
        key = folder.resolve()
        if key not in seen:
            seen.add(key)
            out.append(folder)
    return out
