"""Plug-ins: a ``loss.name`` or ``task.name`` value ``module:attribute`` is imported when the config is validated
and used by the trainer's builders; one that does not import or lacks the interface is refused in one line naming
the field and the value, before any run folder is written. The examples of docs/extending.md provide the
interfaces they document."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from plugin_package import PACKAGE, REPORTED_RATIO, documented_examples, forget, write_package, write_plugins
from rlscale.cli import app
from rlscale.config import ConfigError, compose_run_config, typed
from rlscale.config.registry import LOSS, TASK
from rlscale.config.schema import LossConfig, TaskConfig
from rlscale.rl import LossInputs, policy_loss
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
    out = policy_loss(loss_inputs(), cfg.loss)
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
        task = TASK.load("my_pkg.tasks:Doubling")(TaskConfig(train_size=5, val_size=2))
        problem = task.train_problems()[0]
        assert problem.prompt == f"double {int(problem.answer) // 2} ="
        assert task.is_correct(problem, f" {problem.answer}") and not task.is_correct(problem, "1")
        assert task.demonstration(problem).answer == problem.answer
        assert len({p.prompt for p in task.train_problems() + task.val_problems()}) == 7
        with pytest.raises(ConfigError) as err:
            compose_run_config(["task.name=my_pkg.tasks:Doubling", "task.train_size=99999", "task.val_size=2"])
        assert str(err.value).endswith(": field 'task.train_size': 99999 and task.val_size 2 distinct prompts, but "
                                       "100,000 numbers to double")
        out = policy_loss(loss_inputs(), LossConfig("my_pkg.losses:reinforce", 0.2, 0.2, 4.0))
        assert out.per_token.tolist() == [[1.0, 2.0], [-0.5, 0.0]]
        assert (float(out.ratio_mean), float(out.clip_fraction)) == (1.0, 0.0)
    finally:
        forget("my_pkg")
