"""A results folder keeps working after a copy or move: sweep.json and each config.yaml hold paths relative
to the results folder, so ``status``, a resume, ``fit`` and ``report`` of the copy find every run; records
written with absolute paths still read."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.sweep.status import refs_under

SHORT = ["trainer.max_steps=2", "trainer.eval_every=2", "trainer.checkpoint_every=2", "task.val_size=20"]


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def mini_spec(folder: Path, overrides=SHORT) -> Path:
    spec = folder / "mini.yaml"
    spec.write_text(yaml.safe_dump({"name": "mini", "kind": "list", "base": {"name": "scalerl"},
                                    "overrides": list(overrides), "variants": {"dapo": ["loss=dapo"]}}, sort_keys=False))
    return spec


def test_a_dry_run_writes_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("sweep", f"conf={mini_spec(tmp_path)}", "--seeds", "1", "--dry-run", "--results", "res")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "res/mini/sweep.json").read_text())
    assert [v["run_dir"] for v in record["variants"]] == ["scalerl", "dapo"]
    assert OmegaConf.load(tmp_path / "res/mini/dapo/config.yaml").out == "mini/dapo"
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "res", moved)
    assert [ref.run_dir for ref, _ in refs_under(moved)] == [moved / "mini/scalerl", moved / "mini/dapo"]


def test_an_absolute_record_of_a_moved_folder_still_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("sweep", f"conf={mini_spec(tmp_path)}", "--seeds", "1", "--dry-run", "--results", "res").exit_code == 0
    path = tmp_path / "res/mini/sweep.json"
    record = json.loads(path.read_text())
    for variant in record["variants"]:  # as an older rlscale wrote it, on another machine
        variant["run_dir"] = f"/cluster/scratch/results/mini/{variant['run']}"
    path.write_text(json.dumps(record))
    refs = [ref.run_dir for ref, _ in refs_under(tmp_path / "res")]
    assert refs == [tmp_path / "res/mini/scalerl", tmp_path / "res/mini/dapo"]
    again = cli("sweep", f"conf={tmp_path / 'mini.yaml'}", "--seeds", "1", "--dry-run", "--results", "res")
    assert again.exit_code == 0, again.output
    assert [v["run_dir"] for v in json.loads(path.read_text())["variants"]] == ["scalerl", "dapo"]


@pytest.mark.slow
def test_a_copied_finished_sweep_keeps_status_resume_fit_and_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")
    spec = mini_spec(tmp_path, ["trainer.max_steps=4", "trainer.eval_every=1", "task.val_size=20"])  # 5 evals to fit
    first = cli("sweep", f"conf={spec}", "--seeds", "1", "--results", "res")
    assert first.exit_code == 0, first.output
    copy = tmp_path / "copied"
    shutil.copytree(tmp_path / "res", copy)
    shutil.rmtree(tmp_path / "res")  # the original is gone: nothing may point at it
    before = {run: (copy / "mini" / run / "metrics.jsonl").read_bytes() for run in ("scalerl", "dapo")}

    status = cli("status", str(copy))
    assert status.exit_code == 0 and "2 runs: 2 done" in status.output and "lost" not in status.output

    resumed = cli("sweep", f"conf={spec}", "--seeds", "1", "--results", str(copy))
    assert resumed.exit_code == 0, resumed.output
    assert "skipped scalerl (finished), dapo (finished)" in " ".join(resumed.output.split())
    assert {run: (copy / "mini" / run / "metrics.jsonl").read_bytes() for run in before} == before
    assert not (tmp_path / "res").exists()

    fit = cli("fit", str(copy))  # 4 steps of the toy are too flat to fit: what counts is that both runs are read
    table = " ".join(fit.output.split())
    assert "dapo s0 │ 4 │" in table and "scalerl s0 │ 4 │" in table, fit.output  # 4 evals past the cutoff each
    report = cli("report", "--html", str(copy))
    assert report.exit_code == 0, report.output
    assert "(1 sweeps, 2 runs)" in " ".join(report.output.split()) and (copy / "report.html").is_file()
