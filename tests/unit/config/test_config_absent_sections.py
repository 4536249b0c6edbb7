"""Sections and fields added to the schema after run folders were written (``mixture``, ``eval``,
``launcher.generator_tasks``, ``engine.activation_checkpointing``, ``logger.completions_rows``): a config.yaml without them reads them as their defaults and keeps the run's
identity, so its checkpoint resumes, and ``rlscale run`` or a sweep with the same overrides takes the folder as
the same run; setting the section is a different run (a different job shape: the same identity)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlscale.config import ConfigError, compose_run_config, load_run_config, typed
from rlscale.config.schema import ABSENT_AS_DEFAULT, FLAT_DEFAULTS
from rlscale.fit.curves import companion_keys
from rlscale.sweep.expand import Run
from rlscale.sweep.resolve import ResolvedRun
from rlscale.sweep.state import config_conflict
from rlscale.train.checkpoint import RunIdentity
from rlscale.train.entry import prepare_run_dir


@pytest.mark.parametrize("setting", [["eval=code"], ["task=math_code"],
                                     ["launcher.tasks_per_node=2", "launcher.generator_tasks=1"],
                                     ["engine.activation_checkpointing=true"], ["logger.completions_rows=2"]])
def test_a_config_written_before_the_sections_is_the_same_run(tmp_path, setting):
    cfg = compose_run_config([f"out={tmp_path / 'run'}"])
    older = OmegaConf.to_container(cfg)
    for name in ABSENT_AS_DEFAULT:
        section, _, leaf = name.rpartition(".")
        del (older[section] if section else older)[leaf]
    (tmp_path / "run").mkdir()
    path = tmp_path / "run" / "config.yaml"
    path.write_text(OmegaConf.to_yaml(older))
    loaded = load_run_config(path)
    assert OmegaConf.to_container(loaded) == OmegaConf.to_container(cfg)
    assert RunIdentity.of(typed(loaded), path.parent) == RunIdentity.of(typed(cfg), path.parent)
    assert prepare_run_dir([f"out={tmp_path / 'run'}"])[0] == tmp_path / "run"
    assert all(f"{name.rpartition('.')[2]}:" not in path.read_text() for name in ABSENT_AS_DEFAULT)  # left as it was
    run = Run(variant="run", name="run", config="config", overrides=(), axis=None, seed=None)
    assert config_conflict(ResolvedRun(run, (), cfg, path.parent)) is None
    changed = compose_run_config([f"out={tmp_path / 'run'}", *setting])
    assert config_conflict(ResolvedRun(run, tuple(setting), changed, path.parent)) is not None
    same_identity = all(o.startswith(("launcher.", "logger.")) for o in setting)  # job shape, tracking: may change
    assert (RunIdentity.of(typed(changed), path.parent) == RunIdentity.of(typed(cfg), path.parent)) == same_identity
    with pytest.raises(ConfigError, match="a run with a different config exists there"):
        prepare_run_dir([f"out={tmp_path / 'run'}", *setting])


def test_a_part_or_set_is_fitted_with_its_own_error_and_sizes():
    assert companion_keys("val_reward") == ("val_reward_se", "val_samples", "val_prompts")
    assert companion_keys("val_reward/code") == ("val_reward_se/code", "val_samples/code", "val_prompts/code")


@pytest.mark.parametrize("overrides, identity", [
    ([], "217f4a3679c4"), (["loss=dapo"], "cc21d8b509ed"), (["length=penalty"], "35a9f65f6ab1"),
    (["curriculum=uniform"], "607fcdfe35dc"), (["offpolicy=ppo"], "15cda39398c6"),
    (["model=hf", "model.path=/tmp"], "5a3c7d5fe859"), (["normalization=none"], "3fb44404da70"),
    (["filtering=none"], "7a93c671c73c"), (["launcher=slurm"], "217f4a3679c4"),
    (["offpolicy=ppo", "model=hf", "model.path=/tmp", "filtering=none"], "da51c7350992"),
    (["task=code"], "8815ecc53d7d"), (["task=sums_chat"], "a50f57473265"), (["task=math_code"], "aa6127da0905"),
    (["eval=code"], "9e959574fda1"), (["task=math_code", "eval=sums3"], "d2a180a050e7")])
def test_a_section_typed_by_its_option_keeps_the_identity_of_the_flat_section(overrides, identity):
    """The checkpoint identity (rlscale.train.checkpoint.RunIdentity) of configs whose sections were one flat
    section each, every option's knobs in it: the same hash as then (measured with that schema), so their checkpoints
    resume. (The launcher and the logger are not part of it: a resume may change them.)"""
    assert RunIdentity.of(typed(compose_run_config(overrides)), "r").config[:12] == identity


def test_a_config_yaml_of_flat_sections_loads_and_is_the_same_run(tmp_path):
    """A config.yaml whose sections hold every option's knobs, as the flat schema wrote them, loads (the knobs its
    option lacks dropped) and is the same run as the one composed now: resumed, not refused."""
    run = tmp_path / "run"
    _, cfg = prepare_run_dir([f"out={run}", "loss=dapo", "length=penalty"])
    tree = OmegaConf.to_container(cfg)
    for section, flat in FLAT_DEFAULTS.items():
        tree[section] = {**flat, **tree[section]}
    (run / "config.yaml").write_text(OmegaConf.to_yaml(tree))
    loaded = load_run_config(run / "config.yaml")
    assert (loaded.loss.eps_high, "cispo_cap" in loaded.loss, "window" in loaded.length) == (0.28, False, False)
    assert prepare_run_dir([f"out={run}", "loss=dapo", "length=penalty"])[0] == run


def flat_task(task: dict, **written) -> dict:
    """``task`` as the flat task schema wrote it: every option's knobs, at their defaults but for ``written``."""
    return {**FLAT_DEFAULTS["task"], **task, **written}


def test_a_config_yaml_of_flat_task_sections_loads_and_keeps_its_identity(tmp_path, monkeypatch):
    """A config.yaml of one flat task class (every task's knobs in the run's task, each mixture part's and each
    downstream set's) loads, each task typed by its name, and keeps the identity measured with that schema; a math
    task's ``prompt_style: question``, which conf/task/math.yaml and conf/eval/gsm8k.yaml wrote and math never read,
    is kept in ``unread`` under the task's dotted name."""
    monkeypatch.chdir(tmp_path)
    Path("math.jsonl").write_text("".join(json.dumps({"prompt": f"{i}+1", "answer": str(i + 1)}) + "\n"
                                          for i in range(50)))
    math = ["task=math", "task.path=math.jsonl", "task.val_size=10", "eval=gsm8k",
            "eval.downstream.0.task.path=math.jsonl", "eval.downstream.0.task.val_size=10"]
    for overrides, identity, unread in (
            (math, "9a995d81fa56", {"task": {"prompt_style": "question"},
                                    "eval.downstream[0].task": {"prompt_style": "question"}}),
            (["task=math_code", "eval=sums3"], "d2a180a050e7", {})):
        tree = OmegaConf.to_container(compose_run_config(overrides))
        style = {"prompt_style": "question"} if tree["task"]["name"] == "math" else {}
        tree["task"] = flat_task(tree["task"], **style)
        for entry in tree["mixture"]["parts"] + tree["eval"]["downstream"]:
            entry["task"] = flat_task(entry["task"], **({"prompt_style": "question"} if entry["task"]["name"] == "math"
                                                         else {}))
        Path("config.yaml").write_text(OmegaConf.to_yaml(tree))
        loaded = typed(load_run_config(Path("config.yaml")))
        assert RunIdentity.of(loaded, "r").config[:12] == identity
        assert loaded.unread == unread
        tasks = [loaded.task] + [entry.task for entry in loaded.mixture.parts + loaded.eval.downstream]
        assert [type(task).__name__ for task in tasks] == [
            {"math": "MathTaskConfig", "mixture": "MixtureTaskConfig", "reasoning_gym": "ReasoningGymConfig",
             "code": "CodeTaskConfig"}[task.name] for task in tasks]


def test_a_flat_knob_another_option_never_read_is_kept_for_the_identity(tmp_path):
    """A sweep's shared ``offpolicy.batches_per_version=8`` was written beside offpolicy=pipeline, which never read
    it: the file loads, the typed section lacks it, ``unread`` keeps it, and the identity is the one the flat file
    had (with 8), not the one at the default (2)."""
    run = tmp_path / "run"
    _, cfg = prepare_run_dir([f"out={run}"])
    tree = OmegaConf.to_container(cfg)
    del tree["unread"]
    flat = {**FLAT_DEFAULTS["offpolicy"], **tree["offpolicy"], "batches_per_version": 8}
    (run / "config.yaml").write_text(OmegaConf.to_yaml({**tree, "offpolicy": flat}))
    loaded = typed(load_run_config(run / "config.yaml"))
    assert not hasattr(loaded.offpolicy, "batches_per_version")
    assert loaded.unread == {"offpolicy": {"batches_per_version": 8}}
    assert RunIdentity.of(loaded, run) != RunIdentity.of(typed(cfg), run)
    (run / "config.yaml").write_text(OmegaConf.to_yaml({**tree, "offpolicy": {**flat, "batches_per_version": 2}}))
    assert RunIdentity.of(typed(load_run_config(run / "config.yaml")), run) == RunIdentity.of(typed(cfg), run)
