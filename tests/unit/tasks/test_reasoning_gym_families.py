"""Any reasoning-gym family from a task config (a file of the user's or ``task.dataset=NAME``): chain_sum's
defaults stay with chain_sum, a bad generator argument is refused as the config is composed in one line
naming ``task.dataset_kwargs.<key>``, and the held-out split is ``task.val_size`` distinct prompts (the chat
presets hold 1,000) or a one-line refusal."""
from __future__ import annotations

import pytest

from rlscale.config.compose import ConfigError, compose_run_config, typed
from rlscale.paths import CONFIG_PATH_ENV
from rlscale.tasks.reasoning_gym import DEFAULT_KWARGS, ReasoningGymConfig, ReasoningGymTask, generator_kwargs
from rlscale.train.components import build_task

SMALL = ["task.prompt_style=question", "task.answer_format=math_verify", "task.train_size=30", "task.val_size=10"]


def task_of(*overrides):
    return build_task(typed(compose_run_config(list(overrides))))


def scores_answers_not_echoes(task):
    """A few problems: the reference and a sentence stating it score, the prompt repeated does not."""
    for problem in task.val_problems()[:5]:
        assert task.is_correct(problem, problem.answer)
        assert task.is_correct(problem, f"So the final answer is {problem.answer}.")
        assert not task.is_correct(problem, problem.prompt)


@pytest.mark.parametrize("family, overrides", [
    ("basic_arithmetic", []),
    ("basic_arithmetic", ["+task.dataset_kwargs.max_terms=3", "+task.dataset_kwargs.max_digits=2"]),
    ("gsm_symbolic", []),
    ("products", ["+task.dataset_kwargs.max_digits=2"]),
])
def test_a_family_from_an_override(family, overrides):
    task = task_of(*SMALL, f"task.dataset={family}", *overrides)
    assert task.name == f"reasoning_gym/{family}"
    assert len(task.train_problems()) == 30 and len(task.val_problems()) == 10
    scores_answers_not_echoes(task)


def test_a_family_from_a_task_file_of_the_users(tmp_path, monkeypatch):
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "my_gsm.yaml").write_text(
        "name: reasoning_gym\ndataset: gsm_symbolic\nprompt_style: question\nanswer_format: math_verify\n"
        "train_size: 30\nval_size: 10\ndataset_kwargs:\n  difficulty: 1.0\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path))
    task = task_of("task=my_gsm")
    assert task.name == "reasoning_gym/gsm_symbolic"
    scores_answers_not_echoes(task)


def test_chain_sum_defaults_apply_to_chain_sum_only():
    assert generator_kwargs("chain_sum", {}) == DEFAULT_KWARGS["chain_sum"]
    assert generator_kwargs("chain_sum", {"max_terms": 2})["max_terms"] == 2
    assert generator_kwargs("products", {}) == {}
    assert compose_run_config(["task.dataset=gsm_symbolic"]).task.dataset_kwargs == {}


@pytest.mark.parametrize("overrides, line", [
    (["task.dataset=gsm_symbolic", "+task.dataset_kwargs.min_terms=2"],
     "field 'task.dataset_kwargs.min_terms': not an argument of reasoning-gym's gsm_symbolic (it takes difficulty)"),
    (["task.dataset=gsm_symbolic", "+task.dataset_kwargs.difficulty=2.0"],
     "field 'task.dataset_kwargs.difficulty': 2.0 refused by reasoning-gym's gsm_symbolic (AssertionError)"),
    (["task.dataset=products", "+task.dataset_kwargs.min_digits=0"],
     "field 'task.dataset_kwargs.min_digits': 0 refused by reasoning-gym's products (min_digits must be positive)"),
    (["+task.dataset_kwargs.size=5"], "field 'task.dataset_kwargs.size': set by task.train_size and task.val_size"),
    (["task.dataset=chainsum"], "field 'task.dataset': 'chainsum' is not a reasoning-gym task; did you mean "
                                "'chain_sum'?"),
])
def test_a_bad_argument_is_refused_as_the_config_is_composed_in_one_line_naming_it(overrides, line):
    with pytest.raises(ConfigError) as err:
        compose_run_config([*SMALL, *overrides])
    assert str(err.value) == f"overrides {' '.join([*SMALL, *overrides])}: {line}"


def test_the_task_built_from_an_unchecked_config_refuses_it_alike():
    with pytest.raises(ValueError, match=r"^field 'task.dataset_kwargs.min_digits': 0 refused by reasoning-gym's "):
        ReasoningGymTask(ReasoningGymConfig(dataset="products", dataset_kwargs={"min_digits": 0}))


@pytest.mark.parametrize("preset", ["basic_arithmetic_chat", "gsm_symbolic_chat"])
def test_chat_presets_hold_1000_distinct_held_out_prompts(preset):
    task = task_of(f"task={preset}")
    val = [p.prompt for p in task.val_problems()]
    assert len(val) == len(set(val)) == 1000
    assert not set(val) & {p.prompt for p in task.train_problems()}
    assert [p.index for p in task.val_problems()] == list(range(1000))
    scores_answers_not_echoes(task)


def test_sums_chat_holds_out_every_problem_training_leaves():
    task = task_of("task=sums_chat")
    val = {p.prompt for p in task.val_problems()}
    train = {p.prompt for p in task.train_problems()}
    assert (len(task.val_problems()), len(val), len(train), len(val | train)) == (88, 88, 112, 200)


def test_a_space_too_small_for_the_held_out_split_is_refused_in_one_line():
    with pytest.raises(ValueError) as err:
        task_of("task=sums_chat", "task.val_size=100")
    assert str(err.value).startswith("task.val_size=100: reasoning-gym's chain_sum with these task.dataset_kwargs "
                                     "gave 88 distinct prompts outside the training split")
    assert "\n" not in str(err.value)
