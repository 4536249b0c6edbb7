"""The code task: a fixed held-out split of distinct prompts, determined by the seed, and a verifier that runs
the answer's code on hidden tests in the sandbox."""
from __future__ import annotations

import pytest

from rlscale.config import ConfigError, compose_run_config
from rlscale.tasks.code import CodeTask, CodeTaskConfig, answer_code


def task(**kwargs) -> CodeTask:
    return CodeTask(CodeTaskConfig(**{"train_size": 200, "val_size": 50, **kwargs}))


def test_split_sizes_and_distinct_held_out_prompts():
    code = task()
    train, val = code.train_problems(), code.val_problems()
    assert (len(train), len(val)) == (200, 50)
    assert [p.index for p in val] == list(range(50))
    assert len({p.prompt for p in val}) == 50
    assert not {p.prompt for p in val} & {p.prompt for p in train}


def test_the_seed_determines_the_problems():
    assert [p.prompt for p in task().val_problems()] == [p.prompt for p in task().val_problems()]
    assert [p.prompt for p in task().train_problems()] != [p.prompt for p in task(seed=7).train_problems()]


def test_demonstrations_pass_their_own_tests():
    code = task()
    for problem in code.val_problems()[:10]:
        demo = code.demonstration(problem)
        assert demo.answer == problem.answer
        assert code.is_correct(problem, demo.answer), problem.prompt


def test_wrong_and_hostile_code_fails():
    code = task()
    problem = code.val_problems()[0]
    params = problem.answer.split("\n")[0]
    for answer in (f"{params}\n    return None", "def g(x):\n    return x", "import sys\nsys.exit(0)",
                   f"class Same:\n    def __eq__(self, other):\n        return True\n{params}\n    return Same()",
                   "import os\nos.system('echo hi')", "while True: pass", "not python at all"):
        assert not code.is_correct(problem, answer), answer


def test_the_answer_is_the_first_python_block_when_there_is_one():
    problem = task().val_problems()[0]
    text = f"Here it is:\n```python\n{problem.answer}\n```\nDone."
    assert answer_code(text) == problem.answer + "\n"
    assert task().is_correct(problem, text)
    assert answer_code("def f(x):\n    return x") == "def f(x):\n    return x"


def test_question_prompts_ask_for_a_python_block():
    prompt = task(prompt_style="question").val_problems()[0].prompt
    assert prompt.startswith("Write a Python function `f(") and prompt.endswith("```python block.")


@pytest.mark.parametrize("kwargs, message", [  # the bounds of CodeTaskConfig, checked as a config built in code is
    ({"val_size": 0}, r"^field 'task.val_size': must be in \(0, 2105\), got 0$"),
    ({"val_size": 2105}, r"^field 'task.val_size': must be in \(0, 2105\), got 2105$"),
    ({"prompt_style": "poem"}, r"^field 'task.prompt_style': must be one of expression, question, got 'poem'$"),
    ({"answer_format": "math_verify"}, r"^field 'task.answer_format': must be one of exact, tagged, got 'math_verify'$"),
    ({"train_size": 0}, r"^field 'task.train_size': must be > 0, got 0$"),
])
def test_bad_config_is_one_line_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        task(**kwargs)
    overrides = [f"task.{key}={value}" for key, value in kwargs.items()]
    with pytest.raises(ConfigError, match=message.replace("^", ": ", 1)):  # and as the config is composed
        compose_run_config(["task=code", *overrides])
