"""A task's own arguments are checked as the config is composed, before any compute: each task class's
``config_problems`` (a reasoning-gym name, generator arguments and the values its config refuses, a held-out
split beyond what the family can give; a math file, its columns and rows; the code task's space), for the run's
task, each mixture part and each downstream set, every problem one line naming the field. ``rlscale run`` and
``rlscale sweep --dry-run`` then exit 2 before anything is written."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import reasoning_gym
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.config import ConfigError, compose_run_config
from rlscale.tasks.champ import CHAMP_PROBLEMS
from rlscale.tasks.reasoning_gym import SPACES, family_configs

needs_champ = pytest.mark.skipif(importlib.util.find_spec("champ_dataset") is None,
                                 reason="champ-dataset not installed (pip install champ-dataset)")


def refusal(*overrides: str) -> str:
    """The line ``compose_run_config`` refuses ``overrides`` with, without its ``overrides ...:`` prefix."""
    with pytest.raises(ConfigError) as err:
        compose_run_config(list(overrides))
    prefix = f"overrides {' '.join(overrides)}: "
    assert str(err.value).startswith(prefix) and "\n" not in str(err.value)
    return str(err.value)[len(prefix):]


@pytest.mark.parametrize("overrides, line", [
    (["task.dataset=nosuch_task"], "field 'task.dataset': 'nosuch_task' is not a reasoning-gym task; reasoning-gym "
                                   f"registers {len(family_configs())}, such as chain_sum, basic_arithmetic, "
                                   "gsm_symbolic, products"),
    (["+task.dataset_kwargs.nosuch=1"], "field 'task.dataset_kwargs.nosuch': not an argument of reasoning-gym's "
                                        "chain_sum (it takes min_terms, max_terms, min_digits, max_digits, "
                                        "allow_negation)"),
    (["+task.dataset_kwargs.max_term=3"], "field 'task.dataset_kwargs.max_term': not an argument of reasoning-gym's "
                                          "chain_sum (it takes min_terms, max_terms, min_digits, max_digits, "
                                          "allow_negation); did you mean 'max_terms'?"),
    (["+task.dataset_kwargs.min_terms=5"], "field 'task.dataset_kwargs': min_terms=5, max_terms=4 refused by "
                                           "reasoning-gym's chain_sum (max_terms must be >= min_terms)"),
    (["task.val_size=100000"], "field 'task.val_size': 100000 distinct held-out prompts, but reasoning-gym's "
                               "chain_sum with these task.dataset_kwargs has 84,200 distinct prompts in all and the "
                               "training split takes at least one; lower task.val_size or widen "
                               "task.dataset_kwargs"),
    (["task=sums_chat", "task.val_size=200"], "field 'task.val_size': 200 distinct held-out prompts, but "
                                              "reasoning-gym's chain_sum with these task.dataset_kwargs has 200 "
                                              "distinct prompts in all"),
    (["task=code", "task.val_size=2105"], "field 'task.val_size': must be in (0, 2105), got 2105"),  # its bounds
    (["task=math_code", "mixture.parts.0.task.dataset=nosuch"], "field 'mixture.parts[0].task.dataset': 'nosuch' is "
                                                                "not a reasoning-gym task"),
    (["task=math_code", "mixture.parts.1.task.prompt_style=poem"], "field 'mixture.parts[1].task.prompt_style': must "
                                                                   "be one of expression, question, got 'poem'"),
    (["eval=code", "eval.downstream.0.task.val_size=3000"], "field 'eval.downstream[0].task.val_size': must be in "
                                                            "(0, 2105), got 3000"),
    (["task.path=x"], "field 'task.path': task.name=reasoning_gym has no such knob (its knobs: answer_format, dataset, "
                      "dataset_kwargs, prompt_style, seed, train_size, val_size); it is a knob of task.name=math"),
    (["task=math_code", "+mixture.parts.0.task.prompt_key=x"], "field 'mixture.parts[0].task.prompt_key': "
                                                               "mixture.parts[0].task.name=reasoning_gym has no such "
                                                               "knob (its knobs: answer_format, dataset, "
                                                               "dataset_kwargs, prompt_style, seed, train_size, "
                                                               "val_size); it is a knob of "
                                                               "mixture.parts[0].task.name=math"),
    (["eval=code", "eval.downstream.0.task.dataset=chain_sum"], "field 'eval.downstream[0].task.dataset': "
                                                                "eval.downstream[0].task.name=code has no such knob "
                                                                "(its knobs: answer_format, prompt_style, seed, "
                                                                "train_size, val_size); it is a knob of "
                                                                "eval.downstream[0].task.name=reasoning_gym"),
    (["task=math_code", "mixture.parts.1.task.name=nosuch"], "field 'mixture.parts[1].task.name': 'nosuch' is not "
                                                             "one of reasoning_gym, math, code, mixture"),
])
def test_a_bad_task_argument_is_refused_in_one_line_naming_the_field(overrides, line):
    assert refusal(*overrides).startswith(line)


def test_the_presets_and_the_largest_held_out_splits_they_can_give_pass():
    for preset in ("chain_sum", "sums_chat", "sums99_chat", "basic_arithmetic_chat", "gsm_symbolic_chat", "code",
                   "math_code"):
        compose_run_config([f"task={preset}"])
    compose_run_config(["task.val_size=84199"])  # all but one of the default's 84,200 prompts
    compose_run_config(["task=sums_chat", "task.val_size=199"])  # refused later, as drawn: training takes 112
    compose_run_config(["task=code", "task.val_size=2104"])


@pytest.mark.parametrize("dataset, kwargs", [
    ("chain_sum", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),  # 10^2 x 2 = 200
    ("chain_sum", {"min_terms": 1, "max_terms": 2, "min_digits": 1, "max_digits": 1, "allow_negation": True}),  # 741
    ("products", {"min_terms": 1, "max_terms": 1, "min_digits": 1, "max_digits": 2}),  # 10 + 90
    ("products", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1, "allow_negation": True}),  # 19^2
])
def test_a_familys_count_of_distinct_prompts_is_what_its_generator_gives(dataset, kwargs):
    config = family_configs()[dataset](**kwargs)
    space = SPACES[dataset](config, 10 ** 9)
    entries = reasoning_gym.create_dataset(dataset, size=30 * space, seed=5, **kwargs)
    assert len({entry["question"] for entry in entries}) == space
    assert len({entry["metadata"]["expression"] for entry in entries}) == space
    assert SPACES[dataset](config, space - 1) == space - 1  # capped, for sizes beyond any val_size


def test_a_count_far_beyond_any_held_out_split_is_cheap():
    config = family_configs()["chain_sum"](min_terms=10 ** 9, max_terms=10 ** 9, max_digits=10 ** 9)
    assert SPACES["chain_sum"](config, 401) == 401


def write_jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_a_math_file_that_is_missing_or_lacks_its_columns_or_rows_is_refused(tmp_path):
    assert refusal("task=math", f"task.path={tmp_path}/none.jsonl") == f"field 'task.path': {tmp_path}/none.jsonl: " \
                                                                       "no such file"
    questions = write_jsonl(tmp_path / "questions.jsonl", [{"question": f"{n} + 1", "answer": str(n + 1)}
                                                           for n in range(10)])
    assert refusal("task=math", f"task.path={questions}") == (
        f"field 'task.prompt_key': {questions}: no column 'prompt' or 'problem'; set task.prompt_key to the column's "
        "name")
    assert refusal("task=math", f"task.path={questions}", "task.prompt_key=question", "task.answer_key=solution") \
        .startswith(f"field 'task.answer_key': {questions}: no column 'solution' or 'reward_model'")
    assert refusal("task=math", f"task.path={questions}", "task.prompt_key=question", "task.val_size=10") == (
        f"field 'task.val_size': must leave training rows among the 10 problems of {questions} (or set "
        "task.val_path), got 10")
    compose_run_config(["task=math", f"task.path={questions}", "task.prompt_key=question", "task.val_size=9"])
    assert refusal("task=math", f"task.path={questions}", "task.prompt_key=question",
                   f"task.val_path={tmp_path}/val.jsonl") == f"field 'task.val_path': {tmp_path}/val.jsonl: no such " \
                                                             "file"
    (tmp_path / "blank.jsonl").write_text("\n\n")
    assert refusal("task=math", f"task.path={tmp_path}/blank.jsonl").endswith("blank.jsonl: no rows")
    (tmp_path / "broken.jsonl").write_text("\n{oops\n")
    assert refusal("task=math", f"task.path={tmp_path}/broken.jsonl").endswith("broken.jsonl line 2: not valid JSON "
                                                                               "(Expecting property name enclosed in "
                                                                               "double quotes)")


def test_a_parquet_files_schema_and_row_count_are_read_without_its_rows(tmp_path):
    path = tmp_path / "verl.parquet"
    pq.write_table(pa.table({"prompt": [[{"role": "user", "content": "1 + 1"}]] * 5,
                             "reward_model": [{"ground_truth": "2"}] * 5}), path)
    compose_run_config(["task=math", f"task.path={path}", "task.val_size=4"])
    assert refusal("task=math", f"task.path={path}", "task.val_size=5") == (
        f"field 'task.val_size': must leave training rows among the 5 problems of {path} (or set task.val_path), "
        "got 5")
    assert refusal("task=math", f"task.path={path}", "task.prompt_key=question", "task.val_size=4").startswith(
        f"field 'task.prompt_key': {path}: no column 'question' or 'problem'")
    (tmp_path / "broken.parquet").write_text("not parquet")
    assert refusal("task=math", f"task.path={tmp_path}/broken.parquet").startswith(
        f"field 'task.path': {tmp_path}/broken.parquet: not a readable parquet file (")


@needs_champ
def test_champ_is_checked_against_its_problem_count():
    compose_run_config(["task=math", "task.path=champ", f"task.val_size={CHAMP_PROBLEMS - 1}"])
    assert refusal("task=math", "task.path=champ", f"task.val_size={CHAMP_PROBLEMS}") == (
        "field 'task.val_size': must leave training rows among the 270 problems of champ (or set task.val_path), "
        "got 270")


def test_rlscale_run_cfg_job_refuses_a_bad_task_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", "--cfg", "job", "task.dataset=nosuch_task"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.splitlines() == ["error: overrides task.dataset=nosuch_task: field 'task.dataset': "
                                        "'nosuch_task' is not a reasoning-gym task; reasoning-gym registers "
                                        f"{len(family_configs())}, such as chain_sum, basic_arithmetic, gsm_symbolic, "
                                        "products"]
    assert not list(tmp_path.iterdir())


def test_a_sweep_dry_run_with_a_bad_task_writes_nothing(workdir):
    result = CliRunner().invoke(app, ["sweep", "conf=loo", "+task.dataset_kwargs.nosuch=1", "--dry-run"],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(
        "loo.yaml: variant 'scalerl': field 'task.dataset_kwargs.nosuch': not an argument of reasoning-gym's "
        "chain_sum (it takes min_terms, max_terms, min_digits, max_digits, allow_negation)")
    assert not list(workdir.iterdir())  # no results/ (sweep.json, run folders) and no slurm/ (sbatch scripts)
