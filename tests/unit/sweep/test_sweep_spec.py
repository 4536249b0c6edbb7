"""Sweep specs: expansion (LOO, list, grid, seeds), validation of every variant before anything is written,
and what ``rlscale sweep --dry-run`` writes (sweep.json, resolved configs, sbatch scripts)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.sweep.expand import expand
from rlscale.sweep.resolve import resolve_runs
from rlscale.sweep.spec import SpecError, find_spec, load_spec

LOO_AXES = {"loss_dapo": "loss", "bf16_head": "precision", "sample_agg": "aggregation", "token_agg": "aggregation",
            "group_norm": "normalization", "no_zvf": "filtering", "uniform": "curriculum",
            "ppo_offpolicy": "offpolicy", "length_penalty": "length"}


def sweep(*args: str):
    return CliRunner().invoke(app, ["sweep", *args])


def write_spec(folder: Path, **body) -> Path:
    path = folder / f"{body.get('name', 'user')}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_loo_is_scalerl_plus_one_reversion_per_axis(tmp_path):
    spec = load_spec(find_spec("loo"))
    assert spec.seeds == 2
    runs = resolve_runs(spec, expand(spec, seeds=1), [], tmp_path)
    assert [r.run.name for r in runs] == ["scalerl", *LOO_AXES]
    base = OmegaConf.to_container(runs[0].cfg)
    assert runs[0].run.axis is None and base["loss"]["name"] == "cispo"
    for run in runs[1:]:
        assert run.run.axis == LOO_AXES[run.run.name]
        cfg = OmegaConf.to_container(run.cfg)
        changed = {k for k in base if k not in ("variant", "out") and cfg[k] != base[k]}
        assert changed == {run.run.axis}, run.run.name
        assert cfg["out"] == f"loo/{run.run.name}" and cfg["sweep"] == "loo"


def test_every_shipped_spec_expands():
    for path in sorted(find_spec("loo").parent.glob("*.yaml")):
        assert expand(load_spec(path)), path.name
    grid = load_spec(find_spec("grid_loss_agg"))
    names = [r.name for r in expand(grid)]
    assert len(names) == 12 and grid.base.name in names and "loss-dapo_aggregation-token" in names


def test_seeds_give_one_run_per_seed(workdir):
    spec = write_spec(workdir, name="two", kind="list", base={"name": "scalerl"},
                      variants={"dapo": ["loss=dapo"]}, seeds=1)
    result = sweep(f"conf={spec}", "--seeds", "3", "--dry-run")
    assert result.exit_code == 0, result.output
    record = json.loads((workdir / "results/two/sweep.json").read_text())
    runs = [(v["name"], v["run"], v["seed"]) for v in record["variants"]]
    assert runs == [("scalerl", f"scalerl_s{k}", k) for k in range(3)] + [("dapo", f"dapo_s{k}", k) for k in range(3)]
    for name, run, seed in runs:
        cfg = OmegaConf.load(workdir / "results/two" / run / "config.yaml")
        assert cfg.seed == seed and cfg.variant == run and cfg.out == f"two/{run}"
        assert (workdir / "slurm/two" / f"{run}.sbatch").is_file()


def test_dry_run_writes_the_sweep_record_configs_and_scripts(workdir):
    result = sweep("conf=loo", "loss=grpo", "--seeds", "1", "--dry-run")
    assert result.exit_code == 0, result.output
    record = json.loads((workdir / "results/loo/sweep.json").read_text())
    assert record["name"] == "loo" and record["kind"] == "loo" and record["base"] == "scalerl"
    assert record["launcher"] == "local" and record["jobs"] == {} and record["overrides"] == ["loss=grpo"]
    by_name = {v["name"]: v for v in record["variants"]}
    assert by_name["loss_dapo"]["overrides"] == ["loss=dapo"] and by_name["loss_dapo"]["axis"] == "loss"
    assert by_name["scalerl"]["axis"] is None and by_name["scalerl"]["seed"] == 0
    # command-line overrides apply to every variant; a variant's own axis still wins
    assert OmegaConf.load(workdir / "results/loo/scalerl/config.yaml").loss.name == "grpo"
    assert OmegaConf.load(workdir / "results/loo/loss_dapo/config.yaml").loss.name == "dapo"
    assert sorted(p.stem for p in (workdir / "slurm/loo").glob("*.sbatch")) == sorted(by_name)
    created = record["created"]
    assert sweep("conf=loo", "loss=grpo", "--seeds", "1", "--dry-run").exit_code == 0
    assert json.loads((workdir / "results/loo/sweep.json").read_text())["created"] == created


def test_dry_run_scripts_go_beside_the_results_and_stale_ones_are_removed(workdir):
    spec = write_spec(workdir, name="two", kind="list", base={"name": "scalerl"}, variants={"dapo": ["loss=dapo"]})
    elsewhere = workdir / "project" / "results"
    first = sweep(f"conf={spec}", "--seeds", "2", "--results", str(elsewhere), "--dry-run")
    assert first.exit_code == 0, first.output
    scripts = workdir / "project" / "slurm" / "two"
    assert sorted(p.name for p in scripts.iterdir()) == ["dapo_s0.sbatch", "dapo_s1.sbatch", "scalerl_s0.sbatch",
                                                         "scalerl_s1.sbatch"]
    assert not (workdir / "slurm").exists()  # nothing in the working directory
    (scripts / "notes.txt").write_text("mine")
    second = sweep(f"conf={spec}", "--seeds", "1", "--results", str(elsewhere), "--dry-run")
    assert second.exit_code == 0 and "removed 4 of an earlier dry run" in " ".join(second.output.split())
    assert sorted(p.name for p in scripts.iterdir()) == ["dapo.sbatch", "notes.txt", "scalerl.sbatch"]
    chosen = workdir / "scripts here"
    third = sweep(f"conf={spec}", "--seeds", "1", "--results", str(elsewhere), "--sbatch-dir", str(chosen), "--dry-run")
    assert third.exit_code == 0 and (chosen / "two" / "scalerl.sbatch").is_file()


@pytest.mark.parametrize("override, message", [
    ("loss=nope", "loss=nope: no such option; the options are cispo, dapo, grpo, gspo"),
    ("loss.bogus=1", "field 'loss.bogus'"),
    ("trainer.max_stpes=5", "field 'trainer.max_stpes'"),
    ("batch.prompts=abc", "field 'batch.prompts'"),
    ("batch.prompts=0", "field 'batch.prompts': must be > 0, got 0"),
    ("launcher=cloud", "launcher=cloud: no such option; the options are local, slurm"),
])
def test_invalid_overrides_fail_before_anything_is_written(workdir, override, message):
    result = sweep("conf=loo", override)
    assert result.exit_code == 2
    assert message in result.output and "variant 'scalerl'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (workdir / "results").exists() and not (workdir / "slurm").exists()


def test_one_invalid_variant_stops_the_whole_sweep(workdir):
    spec = write_spec(workdir, name="mixed", kind="list", base={"name": "scalerl"},
                      variants={"ok": ["loss=dapo"], "bad": ["aggregation=median"]})
    result = sweep(f"conf={spec}")
    assert result.exit_code == 2
    assert "variant 'bad'" in result.output
    assert "aggregation=median: no such option; the options are prompt, sample, token" in result.output
    assert not (workdir / "results").exists()


@pytest.mark.parametrize("body, message", [
    ({"name": "s", "kind": "list", "base": {"name": "b"}, "variants": {"v": ["loss=dapo"]}, "sedes": 2},
     "unknown field 'sedes'"),
    ({"name": "s", "kind": "cube", "base": {"name": "b"}}, "field 'kind': 'cube' is not one of loo, list, grid"),
    ({"name": "s", "kind": "list", "base": {"name": "b", "config": "nope"}, "variants": {"v": []}},
     "field 'base.config': 'nope' is not a root config"),
    ({"name": "s", "kind": "list", "base": {"name": "b"}, "variants": {"v": "loss=dapo"}},
     "field 'variants.v': must be a list of Hydra overrides"),
    ({"name": "s", "kind": "loo", "base": {"name": "b"}, "variants": {"v": ["loss=dapo", "aggregation=token"]}},
     "exactly one axis, got 2 (aggregation, loss)"),
    ({"name": "s", "kind": "grid", "base": {"name": "loss-gspo"}, "axes": {"loss": ["dapo", "cispo"]}},
     "'loss-gspo' is not a grid cell (cells: loss-dapo, loss-cispo)"),
    ({"name": "s", "kind": "list", "base": {"name": "b"}, "variants": {"a b": ["loss=dapo"]}},
     "name 'a b' must match"),
    ({"name": "s", "kind": "list", "base": {"name": "b"}, "variants": {"v": ["loss=dapo"]}, "seeds": 0},
     "field 'seeds': must be an integer >= 1"),
])
def test_spec_errors_name_the_file_and_field(workdir, body, message):
    path = write_spec(workdir, **body)
    with pytest.raises(SpecError, match=None) as err:
        expand(load_spec(path))
    assert message in str(err.value) and str(path) in str(err.value)
    result = sweep(f"conf={path}")
    assert result.exit_code == 2 and message in result.output and not (workdir / "results").exists()


def test_unknown_spec_lists_the_available_ones(workdir):
    result = sweep("conf=nope")
    assert result.exit_code == 2 and "unknown sweep spec" in result.output and "loo" in result.output
    assert "missing conf=NAME" in sweep("loss=dapo").output
