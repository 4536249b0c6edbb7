"""The package's license and metadata: a LICENSE file, the SPDX expression and the extras the README names."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
