"""``rlscale sweep --seeds 10,11,12`` / ``--seeds 10-12`` (seeds chosen by value) and ``--only`` (a subset of
the variants): the run folders, their seeds, and the one-line errors naming the option at fault."""
from __future__ import annotations

import json

import pytest
import yaml
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.sweep.selection import SeedChoice, parse_only, parse_seeds
from rlscale.sweep.spec import SpecError


def sweep(*args: str):
    return CliRunner().invoke(app, ["sweep", *args])


@pytest.mark.parametrize("text, values, named", [
    ("1", (0,), False), ("3", (0, 1, 2), True), ("10,11,12", (10, 11, 12), True), ("10-12", (10, 11, 12), True),
    ("7-7", (7,), True), ("3, 10-11", (3, 10, 11), True), (2, (0, 1), True)])
def test_seeds_parse_as_a_count_a_list_or_a_range(text, values, named):
    assert parse_seeds(text) == SeedChoice(values=values, named=named)


@pytest.mark.parametrize("text, why", [("0", ">= 1"), ("12-10", "ends before"), ("10,10-11", "named twice"),
                                       ("ten", "expected"), ("10,", "expected"), ("-3", "expected")])
def test_bad_seeds_are_one_error_naming_the_option(text, why):
    with pytest.raises(SpecError, match=rf"^--seeds: .*{why}"):
        parse_seeds(text)


def test_no_seeds_option_keeps_the_spec_count():
    assert parse_seeds(None) is None and parse_only(None) is None


def test_chosen_seeds_of_chosen_variants_get_their_own_folders(workdir):
    spec = workdir / "three.yaml"
    spec.write_text(yaml.safe_dump({"name": "three", "kind": "list", "base": {"name": "scalerl"},
                                    "variants": {"dapo": ["loss=dapo"], "grpo": ["loss=grpo"]}, "seeds": 3}))
    result = sweep(f"conf={spec}", "--seeds", "10-11,14", "--only", "grpo,scalerl", "--dry-run")
    assert result.exit_code == 0, result.output
    record = json.loads((workdir / "results/three/sweep.json").read_text())
    runs = [(v["name"], v["run"], v["seed"]) for v in record["variants"]]
    assert runs == [(name, f"{name}_s{k}", k) for name in ("scalerl", "grpo") for k in (10, 11, 14)]
    assert record["seeds"] == 3
    for _, run, seed in runs:
        cfg = OmegaConf.load(workdir / "results/three" / run / "config.yaml")
        assert cfg.seed == seed and cfg.variant == run
    assert not (workdir / "results/three/dapo_s10").exists() and not (workdir / "results/three/scalerl_s0").exists()
    one = sweep(f"conf={spec}", "--seeds", "5-5", "--only", "dapo", "--dry-run")
    assert one.exit_code == 0, one.output
    assert OmegaConf.load(workdir / "results/three/dapo_s5/config.yaml").seed == 5


@pytest.mark.parametrize("option, value, message", [
    ("--seeds", "10..12", "error: --seeds: expected a count N"),
    ("--only", "ppo", "error: --only: "),
    ("--only", ",", "error: --only: name at least one variant")])
def test_bad_selection_exits_2_with_one_line(workdir, option, value, message):
    result = sweep("conf=loo", option, value, "--dry-run")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.output
    assert not (workdir / "results").exists()
