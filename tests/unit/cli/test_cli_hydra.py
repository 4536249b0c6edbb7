"""Hydra's idioms on the rlscale command line, as Hydra documents them: --version, --cfg/-c job|hydra|all with
--resolve and --package/-p, --info/-i [PART], --config-dir/-cd (user configs and specs first), --config-path/-cp,
--config-name/-cn, -m as a grid sweep equal to the grid spec over Hydra's sweep grammar (a,b, range, choice,
glob, one value), shell completion, option choices in --help, and one-line refusals of hydra.* overrides
rlscale would ignore."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale import __version__
from rlscale.cli import app
from rlscale.paths import CONF_DIR, CONFIG_MAIN_ENV, CONFIG_PATH_ENV
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
    run_help = " ".join(cli("run", "--help").output.replace("│", " ").split())
    assert "<job|hydra|all>" in run_help
    for flag in ("--cfg -c", "--resolve", "--package -p", "--info -i", "--config-dir -cd", "--config-path -cp",
                 "--config-name -cn"):
        assert flag in run_help, flag


def test_cfg_job_prints_the_composed_config_and_hydra_its_own_node(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = cli("run", "--cfg", "job", "loss=dapo", "batch.prompts=4")
    assert job.exit_code == 0, job.output
    cfg = yaml.safe_load(job.output)
    assert cfg["loss"]["name"] == "dapo" and cfg["batch"]["prompts"] == 4 and cfg["logger"]["name"] == "none"
    assert cfg["loss"]["eps_high"] == 0.28  # the typed config: every knob of the chosen option
    assert cfg["out"] == "results/${sweep}/${variant}" and cfg["variant"] == "batch.prompts-4_loss-dapo"
    hydra = yaml.safe_load(cli("run", "--cfg", "hydra", "loss=dapo").output)
    assert list(hydra) == ["hydra"] and "help" not in hydra["hydra"] and "hydra_help" not in hydra["hydra"]
    node = hydra["hydra"]
    assert "loss=dapo" in node["overrides"]["task"] and node["runtime"]["choices"]["loss"] == "dapo"
    assert node["run"]["dir"] == node["runtime"]["output_dir"] == "results/default/loss-dapo"  # the folder used
    assert node["sweep"] == {"dir": "results/multirun", "subdir": "loss-dapo"}
    assert not (tmp_path / "results").exists()  # nothing written


def test_cfg_all_package_and_resolve_as_hydra_documents_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    both = cli("run", "-c", "all", "loss=dapo")
    assert both.exit_code == 0, both.output
    cfg = yaml.safe_load(both.output)
    assert cfg["loss"]["name"] == "dapo" and cfg["hydra"]["runtime"]["choices"]["loss"] == "dapo"
    assert cfg["out"] == "results/${sweep}/${variant}"  # interpolations kept without --resolve
    resolved = yaml.safe_load(cli("run", "--cfg", "all", "--resolve", "loss=dapo").output)
    assert resolved["out"] == "results/default/loss-dapo"
    loss = cli("run", "--cfg", "job", "--package", "loss", "loss=gspo")
    assert loss.output.splitlines()[0] == "# @package loss" and yaml.safe_load(loss.output)["name"] == "gspo"
    assert cli("run", "-c", "hydra", "-p", "hydra.run").output == "# @package hydra.run\ndir: results/default/run\n"
    assert cli("run", "-c", "job", "-p", "batch.prompts", "batch.prompts=12").output == "12\n"
    assert cli("run", "-c", "job", "-p", "_global_").output == cli("run", "-c", "job").output
    for args, why in ((["-c", "job", "-p", "nope"], "--package nope: not found in the job config"),
                      (["-c", "hydra", "-p", "loss"], "--package loss: not found in the hydra config"),
                      (["--resolve"], "--resolve goes with --cfg job|hydra|all"),
                      (["-p", "loss"], "--package goes with --cfg job|hydra|all"),
                      (["--cfg", "everything"], "--cfg must be one of job, hydra, all")):
        result = cli("run", *args)
        assert result.exit_code == 2 and result.output.strip() == f"error: {why}" + (
            " (got 'everything')" if "everything" in args else ""), (args, result.output)
    assert not (tmp_path / "results").exists()


def test_info_lists_the_search_path_and_groups(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = cli("run", "--info").output
    for section in ("Installed Hydra Plugins", "Config search path", "Defaults Tree", "Defaults List", "Config"):
        assert f"{section}\n" in info, section
    assert "loss: cispo, dapo, grpo, gspo" in info
    assert "logger: mlflow, none, tensorboard, wandb" in info and str(tmp_path / "sweeps") in info
    assert cli("run", "-i").output == info and cli("run", "--info", "all").output == info


def test_info_prints_the_part_it_is_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    defaults = cli("run", "--info", "defaults", "loss=dapo")
    assert defaults.exit_code == 0, defaults.output
    assert "Defaults List" in defaults.output and "Defaults Tree" not in defaults.output
    rows = [line.split("|")[1].strip() for line in defaults.output.splitlines() if line.startswith("| ")]
    assert "loss/dapo" in rows and "loss/cispo" not in rows and "logger/none" in rows
    tree = cli("run", "--info", "defaults-tree", "loss=gspo").output
    assert "Defaults Tree" in tree and "  loss: gspo" in tree and "Defaults List" not in tree
    search = cli("run", "-i", "searchpath").output
    assert "Config search path" in search and "Defaults" not in search and "| main " in search
    plugins = cli("run", "--info", "plugins").output
    assert "BasicSweeper" in plugins and "Config search path" not in plugins
    config = cli("run", "--info", "config", "batch.prompts=12").output
    assert "Defaults List" in config and "prompts: 12" in config and "Installed Hydra Plugins" not in config
    overridden = cli("run", "--info", "loss=dapo").output  # no part: all, the override composed
    assert "Installed Hydra Plugins" in overridden and "loss/dapo" in overridden
    bad = cli("run", "--info", "defaults", "batch.prompts=-1")
    assert bad.exit_code == 2 and "batch.prompts" in bad.output and len(bad.output.strip().splitlines()) == 1


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
    monkeypatch.setenv(CONFIG_PATH_ENV, "")  # unset, and so again after the test (--config-dir sets it here)
    mine = tmp_path / "mine"
    (mine / "loss").mkdir(parents=True)
    (mine / "loss" / "cispo.yaml").write_text("name: cispo\ncispo_cap: 9.0\n")  # shadows the packaged cispo
    (mine / "sweeps").mkdir()
    (mine / "sweeps" / "tiny.yaml").write_text(yaml.safe_dump(
        {"name": "tiny", "kind": "list", "base": {"name": "scalerl"}, "variants": {"dapo": ["loss=dapo"]}}))
    job = cli("run", "--config-dir", str(mine), "--cfg", "job")
    assert job.exit_code == 0, job.output
    assert yaml.safe_load(job.output)["loss"]["cispo_cap"] == 9.0
    short = cli("run", "-cd", str(mine), "-c", "job", "-p", "loss.cispo_cap")
    assert short.exit_code == 0 and short.output == "9.0\n", short.output
    dry = cli("sweep", "--config-dir", str(mine), "conf=tiny", "--dry-run", "--seeds", "1")
    assert dry.exit_code == 0, dry.output
    assert OmegaConf.load(tmp_path / "results/tiny/scalerl/config.yaml").loss.cispo_cap == 9.0
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "here.yaml").write_text(yaml.safe_dump(
        {"name": "here", "kind": "list", "base": {"name": "scalerl"}, "variants": {"gspo": ["loss=gspo"]}}))
    assert cli("sweep", "conf=here", "--dry-run", "--seeds", "1").exit_code == 0  # the working directory's sweeps/


def test_config_path_replaces_the_packaged_tree_and_config_name_picks_a_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CONFIG_MAIN_ENV, "")  # unset, and so again after the test (-cp sets it in this process)
    mine = tmp_path / "myconf"
    shutil.copytree(CONF_DIR, mine)
    (mine / "batch" / "default.yaml").write_text("prompts: 3\ngenerations: 4\n")
    (mine / "small.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 7\n")
    shown = cli("run", "-cp", "myconf", "-cn", "small", "-c", "job")
    assert shown.exit_code == 0, shown.output
    cfg = yaml.safe_load(shown.output)
    assert (cfg["batch"]["prompts"], cfg["batch"]["generations"], cfg["seed"]) == (3, 4, 7)
    searched = cli("run", "--config-path", str(mine), "--info", "searchpath").output
    assert f"file://{mine}" in searched and f"file://{CONF_DIR}" not in searched
    monkeypatch.setenv(CONFIG_MAIN_ENV, "")
    assert yaml.safe_load(cli("run", "--config-name", "baseline", "-c", "job").output)["loss"]["name"] != "cispo"
    missing = cli("run", "-cp", str(tmp_path / "nope"), "-c", "job")
    assert missing.exit_code == 1 and "no such folder (--config-path)" in missing.output


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
    assert multirun_spec(["optim.lr=1e-4,3e-4"])["axes"] == {
        "optim.lr": {"lr-0.0001": ["optim.lr=0.0001"], "lr-0.0003": ["optim.lr=0.0003"]}}  # Hydra's floats


def cells(spec: dict) -> list:
    """(name, overrides) of every cell of the grid ``spec``, as rlscale sweep expands the written spec."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "grid.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return [(r.name, r.overrides) for r in expand(load_spec(path))]


def test_multirun_expands_hydra_sweeps_range_choice_glob_and_one_value():
    assert cells(multirun_spec(["batch.prompts=range(4,12,4)", "trainer.max_steps=2"])) == [
        ("prompts-4", ("batch.prompts=4",)), ("prompts-8", ("batch.prompts=8",))]
    assert multirun_spec(["batch.prompts=range(4,12,4)", "trainer.max_steps=2"])["overrides"] == ["trainer.max_steps=2"]
    assert cells(multirun_spec(["loss=glob(c*)"])) == [("loss-cispo", ("loss=cispo",))]
    assert [name for name, _ in cells(multirun_spec(["loss=glob(*)"]))] == [
        "loss-cispo", "loss-dapo", "loss-grpo", "loss-gspo"]
    assert [name for name, _ in cells(multirun_spec(["loss=glob(*,exclude=[g*])"]))] == ["loss-cispo", "loss-dapo"]
    assert cells(multirun_spec(["loss=choice(dapo,gspo)", "seed=3"])) == [
        ("loss-dapo", ("loss=dapo",)), ("loss-gspo", ("loss=gspo",))]
    assert cells(multirun_spec(["task.name=choice('my task',b)"])) == [
        ("name-my-task", ("task.name=my\\ task",)), ("name-b", ("task.name=b",))]
    one = multirun_spec(["loss=dapo", "batch.prompts=4"])  # no sweep: one cell, named as a plain run's folder
    assert cells(one) == [("batch.prompts-4_loss-dapo", ())] and one["overrides"] == ["loss=dapo", "batch.prompts=4"]
    assert cells(multirun_spec(["loss=choice(dapo)"])) == [("loss-dapo", ("loss=dapo",))]
    assert cells(multirun_spec([])) == [("run", ())]


def test_multirun_glob_over_a_config_dir_group_sees_its_options(tmp_path, monkeypatch):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "cispo_capped.yaml").write_text("name: cispo\ncispo_cap: 2.0\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path))
    assert [name for name, _ in cells(multirun_spec(["loss=glob(c*)"]))] == ["loss-cispo", "loss-cispo_capped"]


def test_multirun_refusals_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args, why in ((["batch.prompts=interval(1,4)"], "interval() is a continuous range"),
                      (["batch.prompts=glob(*)"], "'batch.prompts' is not a config group"),
                      (["loss=glob(z*)"], "the options of config group 'loss' are cispo, dapo, grpo, gspo"),
                      (["loss=[dapo"], "override error"), (["hydra.run.dir=x"], "does not use Hydra's job runtime")):
        result = cli("run", "-m", *args, "--dry-run")
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, (args, result.output)
        assert why in result.output, (args, result.output)
    assert not (tmp_path / "results").exists()


def test_a_sweep_takes_hydra_overrides_of_one_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    swept = cli("sweep", "conf=loo", "batch.prompts=range(4,12,4)", "--dry-run")
    assert swept.exit_code == 2 and "takes one value per override" in swept.output and "rlscale run -m" in swept.output
    broken = cli("sweep", "conf=loo", "loss=[dapo", "--dry-run")
    assert broken.exit_code == 2 and "override error" in broken.output
    assert len(broken.output.strip().splitlines()) == 1
    quoted = cli("sweep", "conf=loo", "trainer.max_steps=3", "--dry-run", "--seeds", "1", "--only", "scalerl")
    assert quoted.exit_code == 0, quoted.output


def test_multirun_dry_run_of_a_range_writes_its_cells(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("run", "-m", "batch.prompts=range(4,12,4)", "trainer.max_steps=2", "--dry-run")
    assert result.exit_code == 0, result.output
    runs = sorted(p.name for p in (tmp_path / "results/multirun").iterdir() if p.is_dir() and p.name[0] != ".")
    assert runs == ["prompts-4", "prompts-8"]
    assert OmegaConf.load(tmp_path / "results/multirun/prompts-8/config.yaml").batch.prompts == 8
    recorded = yaml.safe_load((tmp_path / "results/multirun/prompts-8/overrides.yaml").read_text())
    assert {"trainer.max_steps=2", "batch.prompts=8", "variant=prompts-8"} <= set(recorded)
    versions = yaml.safe_load((tmp_path / "results/multirun/prompts-8/versions.yaml").read_text())
    assert {"command", "rlscale", "git_commit", "torch", "transformers", "vllm", "deepspeed"} <= set(versions)


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
    monkeypatch.setenv(CONFIG_PATH_ENV, "")  # unset, and so again after the test
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
