"""Shared pytest fixtures (one per need) and the grouping of tests onto pytest-xdist workers."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


SLURM_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-localhost.sh"
DEFAULT_SLURM_CONF = "/tmp/slurm-localhost/etc/slurm.conf"


def _sinfo_answers() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def uses_slurm(item: pytest.Item) -> bool:
    """The test submits to the localhost SLURM (its fixture or its marker)."""
    return "slurm_cluster" in getattr(item, "fixturenames", ()) or item.get_closest_marker("slurm") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Groups for ``pytest -n N --dist loadgroup`` (.ci/run): a module's tests run on one worker, so its module
    fixtures (reference runs) are built once; every module with a test on the localhost SLURM (2 CPUs, one
    node) shares the worker of group ``slurm``, so two tests never wait on each other's jobs."""
    slurm_modules = {item.path for item in items if uses_slurm(item)}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            module = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group("slurm" if item.path in slurm_modules else module))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest without xdist (-p no:xdist) runs on
def pytest_xdist_node_collection_finished(node, ids: list) -> None:
    """Under ``--dist loadgroup`` every node id a worker collects carries its group (``...@group``, added by
    pytest-xdist); with a pytest whose node ids xdist cannot rename (pytest 9.2 with xdist 3.8) a module's tests
    spread over both workers and the order-dependent ones (docs/commands.md's blocks) fail at random. Stop
    before any test runs, naming the versions."""
    ungrouped = [i for i in ids if "@" not in i.rsplit("]", 1)[-1]]
    if node.config.getvalue("dist") == "loadgroup" and ungrouped:
        import xdist
        pytest.exit(f"pytest {pytest.__version__} with pytest-xdist {xdist.__version__}: --dist loadgroup left "
                    f"{len(ungrouped)} tests ungrouped (first {ungrouped[0]}); install the pinned pytest "
                    f"(pyproject's test extra)", returncode=4)


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """A single-node SLURM with accounting on localhost: the running one if ``sinfo`` answers, else brought
    up by scripts/slurm-localhost.sh (as .ci/run does). Skips only when that is impossible (not root, or
    no apt-get to install slurm-wlm). Yields the SLURM_CONF path, also exported to the environment."""
    os.environ.setdefault("SLURM_CONF", DEFAULT_SLURM_CONF)
    if not _sinfo_answers():
        if os.geteuid() != 0:
            pytest.skip("no SLURM answers sinfo and starting one (scripts/slurm-localhost.sh) needs root")
        if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
            pytest.skip("no SLURM answers sinfo and slurm-wlm cannot be installed (no apt-get)")
        up = subprocess.run(["bash", str(SLURM_SCRIPT), "up"], capture_output=True, text=True, timeout=1800)
        if up.returncode != 0 or not _sinfo_answers():
            pytest.fail(f"scripts/slurm-localhost.sh up failed: {(up.stdout + up.stderr)[-2000:]}")
    return os.environ["SLURM_CONF"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run the CLI from an empty folder (results/ and slurm/ land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
