"""The built wheel is all a user needs: installed into a fresh virtual environment (reusing this one's
packages, so torch is not downloaded again) and run from a folder outside the repository, ``rlscale run``
trains a 2-step run and ``rlscale sweep conf=loo --dry-run`` finds the packaged spec, configs and sbatch
template (rlscale.paths). The repository's top-level ``conf/``, ``sweeps/``, ``slurm/run.sbatch.tmpl`` and
``docs/*.md`` ship under ``rlscale/shipped/`` (apart from the code packages ``rlscale/config`` and
``rlscale/sweep``) with the measurements the pages link to (``bench/results/``), every link resolving, without the
generated ``slurm/<sweep>/`` scripts or the examples' run folders, and ``--help`` names the installed pages; an
editable install reads them from the source tree."""
from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def sh(*args, cwd: Path, env=None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{args}: {result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def skipped(folder: str, names):
    """What the source copy leaves out: version control, environments, outputs of the checkout's root (the
    generated ``slurm/<sweep>/`` scripts, not the template beside them)."""
    top = {".git", ".venv", "results", "build", "dist"} if Path(folder) == ROOT else set()
    if Path(folder) == ROOT / "slurm":
        top = {n for n in names if (Path(folder) / n).is_dir()}
    return [n for n in names if n in top or n in ("__pycache__", ".pytest_cache") or n.endswith(".egg-info")]


def source_copy(tmp_path: Path) -> Path:
    """A copy of the checkout to build from (setuptools builds in the source tree, never in the checkout),
    with a sweep's generated scripts in ``slurm/loo/`` as a checkout after ``rlscale sweep --dry-run`` has."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=skipped)
    (source / "slurm/loo").mkdir()
    (source / "slurm/loo/scalerl.sbatch").write_text("#!/bin/bash\n")
    return source


def fresh_venv(tmp_path: Path) -> Path:
    """An empty virtual environment that reuses this one's packages (after its own); returns its purelib."""
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    purelib = next(venv.glob("lib/python*/site-packages"))
    (purelib / "reuse.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return purelib


def test_the_wheel_runs_from_another_folder(tmp_path):
    source = source_copy(tmp_path)
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist",
       source, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("rlscale-*.whl"))
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    for packaged in ("rlscale/shipped/conf/config.yaml", "rlscale/shipped/conf/baseline.yaml",
                     "rlscale/shipped/conf/loss/cispo.yaml", "rlscale/shipped/sweeps/loo.yaml",
                     "rlscale/shipped/slurm/run.sbatch.tmpl", "rlscale/report/templates/report.html.j2"):
        assert packaged in names, packaged
    for folder, ext in (("conf", "yaml"), ("sweeps", "yaml"), ("slurm", "tmpl")):  # every file of the three folders
        shipped = {n.removeprefix("rlscale/shipped/") for n in names if n.startswith(f"rlscale/shipped/{folder}/")}
        assert shipped == {p.relative_to(source).as_posix() for p in (source / folder).rglob(f"*.{ext}")}, folder
    assert {n for n in names if n.endswith(".sbatch") or n.startswith(("conf/", "sweeps/", "slurm/", "docs/"))} == set()
    subpackages = {n.split("/")[1] for n in names if n.startswith("rlscale/") and n.count("/") > 1}
    assert "config" in subpackages and "sweep" in subpackages and not subpackages & {"conf", "sweeps", "slurm", "docs"}
    # the reference pages --help names and the screenshots they show, without the examples' run folders
    assert ({n for n in names if n.startswith("rlscale/shipped/docs/")}
            == {f"rlscale/shipped/docs/{p.relative_to(source / 'docs').as_posix()}"
                for p in [*(source / "docs").glob("*.md"), *(source / "docs/images").glob("*.png")]})
    assert ({n for n in names if n.startswith("rlscale/shipped/bench/results/")}
            == {f"rlscale/shipped/bench/results/{p.name}" for p in (source / "bench/results").glob("*.*")
                if p.suffix in (".md", ".log")})
    for page in (n for n in names if n.startswith("rlscale/shipped/docs/") and n.endswith(".md")):  # links resolve
        for target in re.findall(r"\]\(([^)\s]+)\)", archive.read(page).decode()):
            path = target.split("#")[0]
            if path and "://" not in path:
                assert posixpath.normpath(posixpath.join(posixpath.dirname(page), path)) in names, (page, target)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)

    venv = tmp_path / "venv"
    purelib = fresh_venv(tmp_path)
    sh(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps", wheel,
       cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RLSCALE_CONFIG_PATH")}
    where = sh(venv / "bin" / "python", "-c", "import rlscale; print(rlscale.__file__)", cwd=elsewhere, env=env)
    assert where.stdout.strip().startswith(str(purelib)), where.stdout
    found = sh(venv / "bin" / "python", "-c", "import rlscale.paths as p; print(p.CONF_DIR, p.SWEEPS_DIR, p.SLURM_DIR)",
               cwd=elsewhere, env=env).stdout.split()
    assert found == [str(purelib / "rlscale/shipped" / folder) for folder in ("conf", "sweeps", "slurm")]

    rlscale = venv / "bin" / "rlscale"
    assert sh(rlscale, "--version", cwd=elsewhere, env=env).stdout.startswith("rlscale ")
    wide = {**env, "COLUMNS": "400"}  # rich wraps --help to the width, even inside a long path
    help_text = " ".join(sh(rlscale, "run", "--help", cwd=elsewhere, env=wide).stdout.replace("│", " ").split())
    assert f"{purelib / 'rlscale/shipped/docs/configuration.md'};" in help_text
    assert (purelib / "rlscale/shipped/docs/configuration.md").is_file()
    run = sh(rlscale, "run", "trainer.max_steps=2", "trainer.eval_every=2", "task.val_size=20", cwd=elsewhere, env=env)
    assert "done" in run.stdout
    run_dir = elsewhere / "results/default/task.val_size-20_trainer.eval_every-2_trainer.max_steps-2"  # its overrides
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["kind"] == "train"] == [1, 2]
    assert "step 2/2" in run.stderr  # piped: the plain progress line of the last step

    dry = sh(rlscale, "sweep", "conf=loo", "--dry-run", "--seeds", "1", cwd=elsewhere, env=env)
    assert "nothing submitted" in dry.stdout
    record = json.loads((elsewhere / "results/loo/sweep.json").read_text())
    assert record["variants"][0]["run_dir"] == "scalerl"
    assert Path(record["spec"]).parent == purelib / "rlscale/shipped/sweeps"
    assert "#SBATCH" in (elsewhere / "slurm/loo/scalerl.sbatch").read_text()


def test_an_editable_install_reads_the_source_tree(tmp_path):
    """``pip install -e``: the configs, specs and template are the source tree's top-level folders."""
    source = source_copy(tmp_path)
    purelib = fresh_venv(tmp_path)
    python = purelib.parents[2] / "bin" / "python"
    sh(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-build-isolation",
       "-e", source, cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RLSCALE_CONFIG_PATH")}
    found = sh(python, "-c", "import rlscale.paths as p; print(p.PACKAGE_DIR, p.CONF_DIR, p.SWEEPS_DIR, p.SLURM_DIR)",
               cwd=elsewhere, env=env).stdout.split()
    assert found == [str(source / "rlscale"), str(source / "conf"), str(source / "sweeps"), str(source / "slurm")]
    dry = sh(python, "-m", "rlscale.cli", "sweep", "conf=loo", "--dry-run", "--seeds", "1", cwd=elsewhere, env=env)
    assert "nothing submitted" in dry.stdout
    assert Path(json.loads((elsewhere / "results/loo/sweep.json").read_text())["spec"]) == source / "sweeps/loo.yaml"
    assert "#SBATCH" in (elsewhere / "slurm/loo/scalerl.sbatch").read_text()
