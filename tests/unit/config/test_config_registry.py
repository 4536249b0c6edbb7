"""One registry per axis (rlscale.config.registry): the files of each config group, validation, the code each
name selects and ``rlscale run --help`` name the same options; that code is imported only when chosen."""
from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.config import ConfigError, compose_run_config, packages
from rlscale.config.compose import ForeignKnob, compose_raw
from rlscale.config.registry import AGGREGATION, AXES, BY_FIELD, LOSS, NORMALIZATION
from rlscale.paths import CONF_DIR, PACKAGE_DIR
from rlscale.tasks.answer_format import AnswerFormat

GROUPED = [axis for axis in AXES if axis.group]


def selected(group: str, option: str, dotted: str):
    """The value of ``dotted`` that ``group=option`` composes."""
    return OmegaConf.select(compose_raw([f"{group}={option}"]), dotted)


@pytest.mark.parametrize("axis", GROUPED, ids=lambda axis: axis.field)
def test_each_group_offers_exactly_the_registry_names(axis):
    options = sorted(p.stem for p in (CONF_DIR / axis.group).glob("*.yaml"))
    values = {option: selected(axis.group, option, axis.field) for option in options}
    assert set(values.values()) == set(axis.names)
    if not axis.presets:  # loss=dapo selects loss.name=dapo
        assert [option for option, value in values.items() if option != value] == []


def test_every_config_group_is_an_axis_of_the_registry():
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    # batch: one option, the schema's sizes; eval: presets of a list of downstream sets, not a choice of code
    assert groups == {axis.group for axis in GROUPED} | {"batch", "eval"}


OPTION_OF = {"logger.mode": "logger=wandb"}  # an axis on a knob of one option of another axis: with that option


@pytest.mark.parametrize("axis", AXES, ids=lambda axis: axis.field)
def test_a_name_outside_the_registry_fails_naming_the_field_and_the_names(axis, monkeypatch):
    monkeypatch.setattr(packages, "installed", lambda module: True)  # wandb, as if installed
    with pytest.raises(ConfigError) as err:
        compose_run_config([*([OPTION_OF[axis.field]] if axis.field in OPTION_OF else []), f"{axis.field}=bogus"])
    message = str(err.value)
    assert f"field '{axis.field}': 'bogus' is not one of {', '.join(axis.names)}" in message
    assert "\n" not in message


@pytest.mark.parametrize("overrides, line", [
    (["logger=tensorboard", "logger.mode=online"], r"field 'logger.mode': logger.name=tensorboard has no such knob "
                                                   r"\(its knobs: completions_rows, dir\); it is a knob of logger=wandb$"),
    (["launcher.partition=gpu"], r"field 'launcher.partition': launcher.name=local has no such knob \(its knobs: "
                                 r"generator_tasks, .*max_parallel, .*\); it is a knob of launcher=slurm$"),
    (["offpolicy=ppo", "offpolicy.max_lag=8"],
     r"field 'offpolicy.max_lag': offpolicy.name=ppo has no such knob \(its knobs: batches_per_version\); it is a "
     r"knob of offpolicy=pipeline$"),
])
def test_a_knob_of_another_option_is_refused_in_one_line(overrides, line):
    with pytest.raises(ForeignKnob, match=line):
        compose_run_config(overrides)


@pytest.mark.parametrize("overrides, field, line", [
    (["task.path=x"], "task.path", r"^overrides task.path=x: field 'task.path': task.name=reasoning_gym has no such "
                                   r"knob \(its knobs: answer_format, dataset, dataset_kwargs, prompt_style, seed, "
                                   r"train_size, val_size\); it is a knob of task.name=math$"),
    (["task=code", "task.dataset=products"], "task.dataset",
     r"field 'task.dataset': task.name=code has no such knob .*; it is a knob of task.name=reasoning_gym$"),
    (["task=math_code", "mixture.parts.1.task.val_path=v.jsonl"], "mixture.parts.1.task.val_path",
     r"field 'mixture.parts\[1\].task.val_path': mixture.parts\[1\].task.name=code has no such knob \(its knobs: "
     r"answer_format, prompt_style, seed, train_size, val_size\); it is a knob of mixture.parts\[1\].task.name=math$"),
])
def test_a_knob_of_another_task_is_refused_naming_the_task_that_has_it(overrides, field, line):
    """The run's task, a mixture part's and a downstream set's are typed by their own name; the refusal names the
    field as an override does (a sweep leaves such a shared override out of the variants whose task lacks it)."""
    with pytest.raises(ForeignKnob, match=line) as err:
        compose_run_config(overrides)
    assert err.value.field == field


def defined(path: str) -> bool:
    """``module:attribute`` (the attribute dotted) is defined in the module's source, read without importing
    it (vLLM and DeepSpeed are optional extras)."""
    module, _, attribute = path.partition(":")
    body = ast.parse(open(importlib.util.find_spec(module).origin).read()).body
    for part in attribute.split("."):
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
        if not found:
            return False
        body = found[0].body
    return True


def test_every_factory_names_code_that_exists():
    factories = [(axis.field, name, option.factory) for axis in AXES for name, option in axis.choices.items()
                 if option.factory]
    assert len(factories) > 25
    assert [(field, name, path) for field, name, path in factories if not defined(path)] == []


def test_a_label_has_no_code_and_a_table_covers_the_names():
    with pytest.raises(TypeError, match="precision.name: no code is registered for 'bf16_head'"):
        BY_FIELD["precision.name"].load("bf16_head")
    with pytest.raises(TypeError, match=r"loss.name: the values \['cispo'\] are not the names"):
        LOSS.table({"cispo": None})


CHOSEN_ONLY = """
import sys
from rlscale.config import compose_run_config, typed
from rlscale.train.components import build_pool, build_task, pick_device
cfg = typed(compose_run_config(["task.train_size=20", "task.val_size=5"]))
build_pool(cfg, len(build_task(cfg).train_problems()))
pick_device("cpu")
from rlscale.config.registry import LEARNER, MODEL, OFFPOLICY, TASK
MODEL.load("tiny"), LEARNER.load("torch"), OFFPOLICY.load("ppo")
print(" ".join(sorted(m for m in sys.modules if m.startswith(("rlscale.tasks.math", "rlscale.engines.models.hf_model",
      "rlscale.engines.generators.vllm", "rlscale.engines.learners.deepspeed", "rlscale.train.offpolicy.pipeline",
      "vllm", "deepspeed", "math_verify")))))
TASK.load("math")
print("rlscale.tasks.math" in sys.modules)
"""


def test_the_code_of_a_name_is_imported_only_when_it_is_chosen():
    """The embedded default's choices import neither the other task, the HF loader, vLLM, DeepSpeed nor
    PipelineRL's source; choosing math imports its task then."""
    out = subprocess.run([sys.executable, "-c", CHOSEN_ONLY], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["", "True"]


def test_the_code_a_name_selects_checks_the_name():
    for call, field in ((lambda: LOSS.load("ppo"), "loss.name"), (lambda: AGGREGATION.load("mean"), "aggregation.name"),
                        (lambda: NORMALIZATION.load("std"), "normalization.name"),
                        (lambda: AnswerFormat("boxed"), "task.answer_format")):
        with pytest.raises(ValueError, match=f"^field '{field}': '[a-z]+' is not one of "):
            call()


COMPARED = re.compile(r"\b(?P<owner>\w+?)(?:_cfg)?\.(?P<key>name|generator|learner|device)\s*(?:==|!=|not in|in)\s*"
                      r"(?P<values>\([^)]*\)|\"\w+\")")


def test_every_name_the_code_compares_a_choice_with_is_a_registry_name():
    """Code that compares a choice rather than loading its factory (a validation rule such as
    ``cfg.length.name == "penalty"``, the generators' interruption) names an option of the registry."""
    compared = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for m in COMPARED.finditer(path.read_text()):
            owner = "task" if m["owner"] == "format" else m["owner"]
            field = f"{owner}.{'answer_format' if m['owner'] == 'format' else m['key']}"
            if field in BY_FIELD:
                compared += [(f"{path.relative_to(PACKAGE_DIR)}: {field}", value)
                             for value in re.findall(r'"(\w+)"', m["values"])]
    assert len(compared) > 10
    assert [(where, value) for where, value in compared if value not in BY_FIELD[where.split(": ")[1]].names] == []


def test_run_and_sweep_help_list_every_axis():
    for command in ("run", "sweep"):
        text = " ".join(CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output.split())
        for axis in AXES:
            picked = axis.group if axis.group and not axis.presets else axis.field
            assert f"{picked}={'|'.join(axis.names)}" in text
            assert (f"{axis.field}=MODULE:ATTRIBUTE" in text) == (axis.plugin is not None)
