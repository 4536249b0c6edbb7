"""Plug-ins: a ``loss.name`` or ``task.name`` value ``module:attribute`` is imported when the config is validated
and used by the trainer's builders; one that does not import or lacks the interface is refused in one line naming
the field and the value, before any run folder is written. The examples of docs/extending.md provide the
interfaces they document."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from plugin_package import (PACKAGE, REPORTED_RATIO, documented_examples, forget, write_entry_points, write_package,
                            write_plugins)
from rlscale.cli import app
from rlscale.config import ConfigError, compose_run_config, typed
from rlscale.config.registry import LOSS, TASK
from rlscale.rl import LossInputs, policy_loss
from rlscale.config.reference import reference
from rlscale.paths import CONFIG_PATH_ENV
from rlscale.rl import losses
from rlscale.rl.losses import LossConfig
from rlscale.tasks.base import TaskConfig
from rlscale.train.components import build_task

DOC = Path(__file__).resolve().parents[3] / "docs" / "extending.md"
PLUGINS = ["loss.name=plugs.losses:reinforce", "task.name=plugs.tasks:Halving", "task.train_size=6",
           "task.val_size=3"]


@pytest.fixture
def plugs(tmp_path, monkeypatch):
    """The package ``plugs`` (tests/plugin_package.py) importable for the test."""
    monkeypatch.syspath_prepend(str(write_plugins(tmp_path)))
    forget(PACKAGE)
    yield
    forget(PACKAGE)


def loss_inputs() -> LossInputs:
    return LossInputs(logp=torch.tensor([[-1.0, -2.0], [-0.5, -1.5]], requires_grad=True),
                      gen_logp=torch.tensor([[-1.0, -2.0], [-0.5, -1.5]]), advantages=torch.tensor([1.0, -1.0]),
                      mask=torch.tensor([[1.0, 1.0], [1.0, 0.0]]))


def test_a_plugin_loss_and_task_pass_validation_and_are_built(plugs):
    cfg = typed(compose_run_config(PLUGINS))
    task = build_task(cfg)
    assert task.name == "halving"
    assert [p.prompt for p in task.val_problems()] == ["half of 552 =", "half of 566 =", "half of 580 ="]
    out = policy_loss(loss_inputs(), LOSS.load(cfg.loss.name), cfg.loss)
    assert out.per_token.tolist() == [[1.0, 2.0], [-0.5, 0.0]]  # -A log pi on the mask
    assert float(out.ratio_mean) == REPORTED_RATIO


@pytest.mark.parametrize("override, expected", [
    ("loss.name=plugs.nowhere:reinforce", "field 'loss.name': 'plugs.nowhere:reinforce' cannot be imported "
                                          "(No module named 'plugs.nowhere')"),
    ("loss.name=nowhere.losses:reinforce", "field 'loss.name': 'nowhere.losses:reinforce' cannot be imported "
                                           "(No module named 'nowhere')"),
    ("loss.name=plugs.losses:missing", "field 'loss.name': 'plugs.losses:missing' cannot be imported "
                                       "(module 'plugs.losses' has no attribute 'missing')"),
    ("task.name=plugs.broken:Task", "field 'task.name': 'plugs.broken:Task' cannot be imported "
                                    "(RuntimeError: this module fails as it is imported)"),
    ("loss.name=plugs.losses:NOT_CALLABLE", "field 'loss.name': 'plugs.losses:NOT_CALLABLE' is not a PolicyLoss "
                                            "(rlscale.rl.losses:PolicyLoss): it is not callable"),
    ("loss.name=plugs.losses:one_argument", "field 'loss.name': 'plugs.losses:one_argument' is not a PolicyLoss "
                                            "(rlscale.rl.losses:PolicyLoss): it cannot be called with (tokens, spec)"),
    ("task.name=plugs.tasks:NoVerifier", "field 'task.name': 'plugs.tasks:NoVerifier' is not a Task "
                                         "(rlscale.tasks.base:Task): it lacks is_correct, demonstration"),
    ("task.name=plugs.tasks:make_task", "field 'task.name': 'plugs.tasks:make_task' is not a Task "
                                        "(rlscale.tasks.base:Task): it is not a class"),
    ("task.name=plugs.losses:PolicyTerm", "field 'task.name': 'plugs.losses:PolicyTerm' is not a Task "
                                          "(rlscale.tasks.base:Task): it cannot be built from (cfg)"),
    ("loss.name=plugs.losses:bad_config", "field 'loss.name': 'plugs.losses:bad_config' is not a PolicyLoss "
                                          "(rlscale.rl.losses:PolicyLoss): the annotation of its 'spec' argument, "
                                          "NotAConfig, is not a dataclass subclassing rlscale.rl.losses:LossConfig"),
    ("loss.name=reinforce", "field 'loss.name': 'reinforce' is not one of cispo, dapo, grpo, gspo"),
    ("aggregation.name=plugs.losses:reinforce", "field 'aggregation.name': 'plugs.losses:reinforce' is not one of "
                                                "prompt, sample, token"),
])
def test_a_value_that_is_no_usable_plugin_is_refused_in_one_line(plugs, override, expected):
    with pytest.raises(ConfigError) as err:
        compose_run_config([override])
    assert str(err.value) == f"overrides {override}: {expected}"


def test_rlscale_run_refuses_a_bad_plugin_before_writing_anything(plugs, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "task.name=plugs.tasks:NoVerifier", f"out={out}"],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: overrides task.name=plugs.tasks:NoVerifier out={out}: field 'task.name': 'plugs.tasks:NoVerifier' "
        "is not a Task (rlscale.tasks.base:Task): it lacks is_correct, demonstration"]
    assert not out.exists()


def test_the_documented_examples_provide_their_interfaces(tmp_path, monkeypatch):
    examples = documented_examples(DOC)
    assert set(examples) == {"losses", "tasks"}
    monkeypatch.syspath_prepend(str(write_package(tmp_path, examples, package="my_pkg")))
    forget("my_pkg")
    try:
        LOSS.check("my_pkg.losses:reinforce")
        TASK.check("my_pkg.tasks:Doubling")
        config_class = TASK.config_class("my_pkg.tasks:Doubling")
        assert (config_class.__name__, issubclass(config_class, TaskConfig)) == ("DoublingConfig", True)
        task = TASK.load("my_pkg.tasks:Doubling")(config_class(train_size=5, val_size=2))
        problem = task.train_problems()[0]
        assert problem.prompt == f"double {int(problem.answer) // 2} ="
        assert task.is_correct(problem, f" {problem.answer}") and not task.is_correct(problem, "1")
        assert task.demonstration(problem).answer == problem.answer
        assert len({p.prompt for p in task.train_problems() + task.val_problems()}) == 7
        with pytest.raises(ConfigError) as err:
            compose_run_config(["task.name=my_pkg.tasks:Doubling", "task.train_size=99999", "task.val_size=2"])
        assert str(err.value).endswith(": field 'task.train_size': 99999 and task.val_size 2 distinct prompts, but "
                                       "100,000 numbers to double")
        cfg = typed(compose_run_config(["task.name=my_pkg.tasks:Doubling", "task.numbers=10", "task.train_size=5",
                                        "task.val_size=2"]))  # its own knob, without a +
        assert (type(cfg.task).__name__, cfg.task.numbers) == ("DoublingConfig", 10)
        doubling = "task.name=my_pkg.tasks:Doubling"
        for overrides, said in (([doubling, "task.numbers=0"], "field 'task.numbers': must be > 0, got 0"),
                                ([doubling, "task.path=x"], "field 'task.path': task.name=my_pkg.tasks:Doubling has "
                                                            "no such knob (its knobs: answer_format, numbers, seed, "
                                                            "train_size, val_size); it is a knob of task.name=math"),
                                (["task=math_code", "mixture.parts.1.task.name=my_pkg.tasks:Doubling",
                                  "mixture.parts.1.task.numbers=0"],
                                 "field 'mixture.parts[1].task.numbers': must be > 0, got 0")):
            with pytest.raises(ConfigError) as err:
                compose_run_config(overrides)
            assert str(err.value).endswith(said) and "\n" not in str(err.value)
        out = policy_loss(loss_inputs(), LOSS.load("my_pkg.losses:reinforce"), LossConfig("my_pkg.losses:reinforce"))
        assert out.per_token.tolist() == [[1.0, 2.0], [-0.5, 0.0]]
        assert (float(out.ratio_mean), float(out.clip_fraction)) == (1.0, 0.0)
    finally:
        forget("my_pkg")


@pytest.fixture
def installed(plugs, tmp_path):
    """``plugs`` installed as a distribution that offers ``clipped_reinforce`` as an entry point of rlscale.losses."""
    write_entry_points(tmp_path, "rlscale.losses", {"clipped_reinforce": "plugs.losses:clipped_reinforce"})


def test_a_plugin_loss_brings_its_own_knob_checked_at_compose(installed):
    """Its config class, the annotation of its ``spec`` argument, types the loss section: the knob is set without a
    ``+``, its bound is checked at compose, the loss receives it; the entry point's name selects it too."""
    for name in ("plugs.losses:clipped_reinforce", "clipped_reinforce"):
        cfg = typed(compose_run_config([f"loss.name={name}", "loss.clip=0.5"]))
        assert type(cfg.loss).__name__ == "ClippedConfig" and (cfg.loss.clip, cfg.loss.kl_coef) == (0.5, 0.0)
    out = policy_loss(loss_inputs(), LOSS.load(cfg.loss.name), cfg.loss)
    assert out.per_token.tolist() == [[0.5, 1.0], [-0.25, 0.0]]  # -clip(A, -0.5, 0.5) log pi on the mask
    assert float(out.ratio_mean) == 0.5
    for override, line in (("loss.clip=-1", "field 'loss.clip': must be > 0, got -1.0"),
                           ("loss.clp=1", "field 'loss.clp': loss.name=clipped_reinforce has no such knob (its "
                                          "knobs: clip, kl_coef, tis_cap); did you mean 'loss.clip'?")):
        with pytest.raises(ConfigError) as err:
            compose_run_config(["loss.name=clipped_reinforce", override])
        assert str(err.value) == f"overrides loss.name=clipped_reinforce {override}: {line}"
    with pytest.raises(ConfigError, match=r"field 'loss.clip': loss.name=cispo has no such knob"):
        compose_run_config(["loss.clip=0.5"])


def test_rlscale_run_lists_an_installed_plugin_and_its_knobs(installed, tmp_path):
    runner = CliRunner()
    shown = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "400"})
    assert "loss.name=MODULE:ATTRIBUTE (installed: loss.name=clipped_reinforce with loss.clip)" in " ".join(
        shown.output.split())
    job = runner.invoke(app, ["run", "--cfg", "job", "loss.name=clipped_reinforce", "loss.clip=0.25"])
    assert job.exit_code == 0 and "  name: clipped_reinforce\n" in job.output and "  clip: 0.25\n" in job.output
    out = tmp_path / "run"
    refused = runner.invoke(app, ["run", "loss.name=clipped_reinforce", "loss.clip=-1", f"out={out}"])
    assert refused.exit_code == 2 and not out.exists()
    assert refused.output.strip().splitlines()[-1].endswith("field 'loss.clip': must be > 0, got -1.0")


def test_a_builtin_option_is_its_function_and_its_group_file(tmp_path, monkeypatch):
    """A loss added to the table of rlscale.rl.losses with a group file of its own is a name of loss=, with its
    config class's knobs, its line in the reference and its doc from its docstring; nothing else is edited."""
    def clipped(tokens, spec: losses.ClipConfig):
        """PPO-clip again, under a new name"""
        return losses.grpo(tokens, spec)

    monkeypatch.setitem(losses.LOSSES, "clipped", clipped)
    monkeypatch.delitem(LOSS.__dict__, "choices", raising=False)  # the table is read again
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "clipped.yaml").write_text("name: clipped\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path))
    try:
        cfg = compose_run_config(["loss=clipped", "loss.eps_high=0.3"])
        assert (cfg.loss.name, cfg.loss.eps_low, cfg.loss.eps_high) == ("clipped", 0.2, 0.3)
        assert "- `clipped`: PPO-clip again, under a new name" in reference()
    finally:
        monkeypatch.undo()
        LOSS.__dict__.pop("choices", None)
