"""The package's license and metadata: a LICENSE file, the SPDX expression and the extras the README names; the
build's package list and the top-level folders it maps into the package."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_license_and_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert (ROOT / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]
    assert any(c.startswith("Programming Language :: Python :: 3") for c in project["classifiers"])
    readme = (ROOT / "README.md").read_text()
    for extra in project["optional-dependencies"]:
        assert f"`[{extra}]`" in readme, f"extra {extra} undocumented in README"
    assert re.search(r"tensorboard", " ".join(project["optional-dependencies"]["test"]))


def test_the_build_lists_every_package_and_maps_the_top_level_folders():
    """pyproject.toml names its packages (the mapped folders cannot be found by ``packages.find``): every
    package of ``rlscale/`` is listed, and ``conf/``, ``sweeps/``, ``slurm/``, ``docs/``, ``bench/results/`` ship as
    ``rlscale.shipped.<folder>``, so no shipped folder sits beside a code package of a like name
    (``rlscale/config``, ``rlscale/sweep``)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {f"rlscale.shipped.{folder.replace('/', '.')}": folder
              for folder in ("conf", "sweeps", "slurm", "docs", "bench/results")}
    assert setuptools["package-dir"] == mapped
    assert sorted(setuptools["packages"]) == sorted([*find_packages(str(ROOT), include=["rlscale", "rlscale.*"]), *mapped])
    for folder in mapped.values():
        assert (ROOT / folder).is_dir() and not (ROOT / "rlscale" / folder.split("/")[0]).exists(), folder
    assert not (ROOT / "rlscale/shipped").exists()
    assert (ROOT / "slurm/run.sbatch.tmpl").is_file() and (ROOT / "conf/config.yaml").is_file()
