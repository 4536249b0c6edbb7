"""Hydra's idioms on the rlscale command line: --version, --cfg job|hydra, --info, --config-dir (user
configs and specs first), -m as a grid sweep equal to the grid spec, shell completion, option choices in
--help, and one-line refusals of hydra.* overrides rlscale would ignore."""
from __future__ import annotations

import yaml
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale import __version__
from rlscale.cli import app
from rlscale.paths import CONFIG_PATH_ENV
from rlscale.sweep.expand import expand
from rlscale.sweep.multirun import multirun_spec, write_multirun_spec
from rlscale.sweep.spec import load_spec


def cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_version_completion_and_choices_in_help():
    assert cli("--version").output == f"rlscale {__version__}\n"
    assert "--install-completion" in cli("--help").output
    assert "<auto|gpu_hours|core_hours|flops|samples|tokens|step>" in cli("fit", "--help").output
    assert "<fast|paper>" in cli("fit", "--help").output
    assert "<png|pdf|svg>" in cli("report", "--help").output
    assert "<job|hydra>" in cli("run", "--help").output


def test_cfg_job_prints_the_composed_config_and_hydra_its_own_node(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = cli("run", "--cfg", "job", "loss=dapo", "batch.prompts=4")
    assert job.exit_code == 0, job.output
    cfg = yaml.safe_load(job.output)
    assert cfg["loss"]["name"] == "dapo" and cfg["batch"]["prompts"] == 4 and cfg["logger"]["name"] == "none"
    hydra = yaml.safe_load(cli("run", "--cfg", "hydra", "loss=dapo").output)
    assert "loss=dapo" in hydra["overrides"]["task"] and hydra["runtime"]["choices"]["loss"] == "dapo"
    assert not (tmp_path / "results").exists()  # nothing written


def test_info_lists_the_search_path_and_groups(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = cli("run", "--info").output
    assert "Config search path" in info and "loss: cispo, dapo, grpo, gspo" in info
    assert "logger: mlflow, none, tensorboard, wandb" in info and str(tmp_path / "sweeps") in info


def test_hydra_runtime_overrides_fail_with_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["run", "hydra.run.dir=out"], ["run", "hydra/job_logging=disabled"],
                 ["sweep", "conf=loo", "hydra.sweep.dir=x", "--dry-run"]):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert len(result.output.strip().splitlines()) == 1 and "does not use Hydra's job runtime" in result.output
    assert not (tmp_path / "results").exists()
    ambiguous = cli("run", "--cfg", "job", "loss=dapo,cispo")
    assert ambiguous.exit_code == 2 and "rlscale run -m" in ambiguous.output and "--multirun" not in ambiguous.output


def test_config_dir_configs_and_specs_come_before_the_packaged_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    mine = tmp_path / "mine"
    (mine / "loss").mkdir(parents=True)
    (mine / "loss" / "cispo.yaml").write_text("name: cispo\ncispo_cap: 9.0\n")  # shadows the packaged cispo
    (mine / "sweeps").mkdir()
    (mine / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(
        {"name": "tiny", "kind": "list", "base": {"name": "scalerl"}, "variants": {"dapo": ["loss=dapo"]}}))
    job = cli("run", "--config-dir", str(mine), "--cfg", "job")
    assert job.exit_code == 0, job.output
    assert yaml.safe_load(job.output)["loss"]["cispo_cap"] == 9.0
    dry = cli("sweep", "--config-dir", str(mine), "conf=tiny", "--dry-run", "--seeds", "1")
    assert dry.exit_code == 0, dry.output
    assert OmegaConf.load(tmp_path / "results/tiny/scalerl/config.yaml").loss.cispo_cap == 9.0
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "here.yaml").write_text(yaml.safe_dump(
        {"name": "here", "kind": "list", "base": {"name": "scalerl"}, "variants": {"gspo": ["loss=gspo"]}}))
    assert cli("sweep", "conf=here", "--dry-run", "--seeds", "1").exit_code == 0  # the working directory's sweeps/


def test_multirun_builds_the_variants_of_the_equal_grid_spec(tmp_path):
    overrides = ["loss=cispo,dapo", "aggregation=prompt,token", "batch.prompts=4"]
    path, new = write_multirun_spec(overrides, tmp_path)
    assert new and write_multirun_spec(overrides, tmp_path) == (path, False)  # the same grid again: left as it is
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"name": "multirun", "kind": "grid", "base": {"name": "loss-cispo_aggregation-prompt"},
                                    "axes": {"loss": ["cispo", "dapo"], "aggregation": ["prompt", "token"]},
                                    "overrides": ["batch.prompts=4"]}, sort_keys=False))
    built, written = expand(load_spec(path)), expand(load_spec(grid))
    assert [(r.name, r.overrides, r.axis) for r in built] == [(r.name, r.overrides, r.axis) for r in written]
    assert [r.name for r in built] == ["loss-cispo_aggregation-prompt", "loss-cispo_aggregation-token",
                                       "loss-dapo_aggregation-prompt", "loss-dapo_aggregation-token"]
    assert multirun_spec(["optim.lr=1e-4,3e-4"])["axes"] == {"optim.lr": ["1e-4", "3e-4"]}


def test_multirun_without_a_comma_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("run", "-m", "loss=dapo")
    assert result.exit_code == 2 and "no override with comma-separated values" in result.output


def test_multirun_goes_through_the_sweep_validation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("run", "-m", "loss=cispo,dapo", "batch.prompts=-1")
    assert result.exit_code == 2 and "multirun.yaml: variant 'loss-cispo'" in result.output, result.output
    assert "batch.prompts" in result.output and not (tmp_path / "results/multirun").exists()
    assert not (tmp_path / "results/multirun.yaml").exists()  # the grid that did not validate leaves no spec


def test_multirun_names_its_grid_places_it_and_gives_it_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "elsewhere"
    args = ["run", "-m", "loss=cispo,dapo", "--name", "lossgrid", "--results", str(results), "--seeds", "2"]
    first = cli(*args, "--dry-run")
    assert first.exit_code == 0, first.output
    runs = sorted(p.name for p in (results / "lossgrid").iterdir() if p.is_dir())
    assert runs == ["loss-cispo_s0", "loss-cispo_s1", "loss-dapo_s0", "loss-dapo_s1"]
    assert OmegaConf.load(results / "lossgrid/loss-dapo_s1/config.yaml").seed == 1
    spec = (results / "lossgrid.yaml").read_text()
    assert cli(*args, "--dry-run").exit_code == 0 and (results / "lossgrid.yaml").read_text() == spec  # resumes
    other = cli("run", "-m", "loss=cispo,gspo", "--name", "lossgrid", "--results", str(results), "--dry-run")
    assert other.exit_code == 2 and "another -m grid is saved under the name 'lossgrid'" in other.output
    assert (results / "lossgrid.yaml").read_text() == spec  # nothing overwritten
    seeded = cli("run", "-m", "loss=cispo,dapo", "seed=0,1", "--results", str(results))
    assert seeded.exit_code == 2 and "--seeds N" in seeded.output and not (results / "multirun.yaml").exists()
    alone = cli("run", "--seeds", "2")
    assert alone.exit_code == 2 and "--seeds goes with -m" in alone.output
    assert not (tmp_path / "results").exists()


def test_sweep_list_names_every_spec_with_its_description_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    mine = tmp_path / "mine" / "sweeps"
    mine.mkdir(parents=True)
    (mine / "loo.yaml").write_text(yaml.safe_dump(  # shadows the packaged loo
        {"name": "loo", "kind": "list", "description": "my own loo", "base": {"name": "scalerl"},
         "variants": {"dapo": ["loss=dapo"]}}))
    (mine / "broken.yaml").write_text("name: broken\nkind: nonsense\n")
    listed = cli("sweep", "--list", "--config-dir", str(mine.parent))
    assert listed.exit_code == 0, listed.output
    names = [line.split("│")[1].strip() for line in listed.output.splitlines() if line.count("│") == 4]
    assert {"broken", "loo", "scale_gens"} <= set(names) and names.count("loo") == 1
    text = " ".join(listed.output.replace("│", " ").split())
    assert "loo my own loo" in text and "ScaleRL and its leave-one-out reversions" not in text  # first match only
    assert "broken (not usable:" in text and "'nonsense' is not one of" in text
    assert "scale_gens ScaleRL with 4, 8 or 16 generations per prompt" in text  # a packaged one
    assert not (tmp_path / "results").exists()  # listing writes nothing


def test_a_config_dir_that_does_not_exist_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    for command in (["run", "--cfg", "job"], ["sweep", "--list"]):
        result = cli(*command, "--config-dir", str(tmp_path / "nope"))
        assert result.exit_code == 1 and result.output.strip() == f"error: {tmp_path / 'nope'}: no such folder " \
            "(--config-dir)", result.output
