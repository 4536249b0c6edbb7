"""Where the Hydra tree, sweep specs, sbatch template and reference pages are found.

They live at the top of the repository (``conf/``, ``sweeps/``, ``slurm/run.sbatch.tmpl``, ``docs/*.md``), and the
build ships them inside the package under ``rlscale/shipped/`` (pyproject.toml), apart from the code packages
whose names they resemble (``rlscale.config``, ``rlscale.sweep``).
``shipped_dir`` finds each the same way from an install and from a clone: inside the package of an install, else
beside the package. The shipped folders come last; before them, the user's: each folder of
``RLSCALE_CONFIG_PATH`` (``--config-dir`` sets it; several folders separated by ``os.pathsep``) holds Hydra config
groups and root configs, and a ``sweeps/`` subfolder of specs; the working directory's ``sweeps/`` is searched
for specs after those. ``RLSCALE_CONFIG_MAIN`` (``--config-path``, Hydra's ``config_path``) names a folder that takes
the packaged ``conf``'s place as the primary config folder."""
from __future__ import annotations

import errno
import os
from importlib import resources
from pathlib import Path
from typing import List

PACKAGE_DIR = Path(str(resources.files("rlscale")))  # pip installs unpack wheels, so this is a folder
SHIPPED = "shipped"  # the wheel's folder of the mapped top-level folders (pyproject.toml)


def shipped_dir(name: str) -> Path:
    """The shipped folder ``name`` (``conf``, ``sweeps``, ``slurm``, ``docs``) of this ``rlscale``: inside the
    package where the build put it (a wheel install: ``site-packages/rlscale/shipped/<name>``), else the folder
    ``<name>/`` beside the package (a clone on ``PYTHONPATH``, an editable install; the source tree has no
    ``rlscale/shipped/``)."""
    inside = PACKAGE_DIR / SHIPPED / name
    return inside if inside.is_dir() else PACKAGE_DIR.parent / name


CONF_DIR = shipped_dir("conf")
SWEEPS_DIR = shipped_dir("sweeps")
SLURM_DIR = shipped_dir("slurm")
DOCS_DIR = shipped_dir("docs")
CONFIG_PATH_ENV = "RLSCALE_CONFIG_PATH"
CONFIG_MAIN_ENV = "RLSCALE_CONFIG_MAIN"
CONFIG_DIR_HELP = ("a folder of your own Hydra configs (groups such as loss/, root configs) and sweeps/ specs, "
                   "searched before the packaged ones")
CONFIG_PATH_HELP = ("the primary config folder in place of the packaged conf/ (Hydra's config_path; relative to the "
                    "working directory): its root configs and groups are the ones composed")


def user_config_dirs() -> List[Path]:
    """The folders of ``RLSCALE_CONFIG_PATH``, in order (missing ones are an error where they are set)."""
    return [Path(p).expanduser().resolve() for p in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep) if p]


def add_config_dir(folder: Path) -> None:
    """Put ``folder`` first on the search path of this process and of the jobs it starts; a folder that does
    not exist is refused (NotADirectoryError naming it), so a typo never silently falls back to the packaged
    configs."""
    _check_folder(folder, "--config-dir")
    os.environ[CONFIG_PATH_ENV] = os.pathsep.join(str(p) for p in [Path(folder).resolve(), *user_config_dirs()])


def set_config_path(folder: Path) -> None:
    """Make ``folder`` the primary config folder (in place of the packaged ``conf``) of this process and of the jobs
    it starts; a folder that does not exist is refused like ``add_config_dir``'s."""
    _check_folder(folder, "--config-path")
    os.environ[CONFIG_MAIN_ENV] = str(Path(folder).resolve())


def _check_folder(folder: Path, flag: str) -> None:
    if not Path(folder).is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"no such folder ({flag})", str(folder))


def main_config_dir() -> Path:
    """The primary config folder: ``RLSCALE_CONFIG_MAIN`` when set, else the packaged ``conf``."""
    main = os.environ.get(CONFIG_MAIN_ENV)
    return Path(main).expanduser().resolve() if main else CONF_DIR


def config_dirs() -> List[Path]:
    """Folders searched for Hydra configs, first match wins: the user's, then the primary one (``main_config_dir``)."""
    return _unique([*user_config_dirs(), main_config_dir()])


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
