"""Downstream eval sets (``eval.downstream``, ``eval=code``): each set is its own task's held-out split, evaluated
like the run's own on a sampling stream of its own (common random numbers from eval to eval), logged as
``val_reward/<name>``; a bad set is one line naming the field."""
from __future__ import annotations

import zlib

import pytest
import torch

from rlscale.config.compose import ConfigError, compose_run_config, typed
from rlscale.core.types import Completion
from rlscale.train.components import formatted_task
from rlscale.train.evaluate import DownstreamEval, evaluate

CODE = ["eval=code", "eval.downstream.0.task.val_size=12"]


class CoinGenerator:
    """A test double for the policy (no model): answers each prompt with its reference when a draw from the
    eval's RNG falls below 0.5, else with "0", so the figures depend on the sampling stream and are countable."""

    def __init__(self, problems):
        self.answers = {p.prompt: p.answer for p in problems}

    def generate(self, prompts, rng, version=0):
        draws = torch.rand(len(prompts), generator=rng).tolist()
        return [Completion(prompt_ids=[1], tokens=[5], gen_logp=[0.0], sampled=[True], versions=[0],
                           text=self.answers[p] if d < 0.5 else "0", thinks=False) for p, d in zip(prompts, draws)]


class Tok:
    def encode_prompt(self, prompt):
        return prompt


@pytest.fixture(scope="module")
def code_set() -> DownstreamEval:
    entry = typed(compose_run_config(CODE)).eval.downstream[0]
    return DownstreamEval(entry.name, entry.samples, formatted_task(entry.task))


def test_a_set_is_its_tasks_held_out_split_on_a_stream_of_its_own(code_set):
    problems = code_set.task.val_problems()
    generator = CoinGenerator(problems)
    line = code_set.evaluate(Tok(), generator, seed=3, step=10)
    direct = evaluate(code_set.task, Tok(), generator, problems, 1, 3, 10, stream=zlib.crc32(b"code"))
    assert line == {"val_reward/code": direct.val_reward, "val_reward_se/code": direct.val_reward_se,
                    "val_samples/code": 12, "val_prompts/code": 12, "val_truncation_rate/code": 0.0}
    rng = torch.Generator().manual_seed(7_919_000_000 + 1_000_003 * 3 + zlib.crc32(b"code"))
    assert line["val_reward/code"] == pytest.approx(float((torch.rand(12, generator=rng) < 0.5).float().mean()))
    assert code_set.evaluate(Tok(), generator, seed=3, step=20) == line  # the same draws at every eval
    own = evaluate(code_set.task, Tok(), generator, problems, 1, 3, 10)
    assert own.val_reward != direct.val_reward  # the run's own eval stream is another


def test_no_set_by_default_and_sets_leave_the_run_task_alone():
    assert typed(compose_run_config([])).eval.downstream == []
    cfg = typed(compose_run_config(CODE))
    assert cfg.task.name == "reasoning_gym" and cfg.eval.downstream[0].task.name == "code"


@pytest.mark.parametrize("overrides, needle", [
    ([*CODE, "eval.downstream.0.name=a/b"],
     "field 'eval.downstream[0].name': name 'a/b' must match [A-Za-z0-9][A-Za-z0-9_.-]* (it names metrics: "
     "val_reward/<name>)"),
    ([*CODE, "eval.downstream.0.samples=0"], "field 'eval.downstream[0].samples': must be >= 1, got 0"),
    ([*CODE, "eval.downstream.0.task.name=codes"], "field 'eval.downstream[0].task.name': 'codes' is not one of"),
    ([*CODE, "eval.downstream.0.task.name=mixture"], "field 'eval.downstream[0].task.name': a mixture cannot"),
    (["eval=gsm8k"], "field 'eval.downstream[0].task.path': not set; task.name=math reads a .jsonl or .parquet"),
    (["task=math"], "field 'task.path': not set"),
    (["task=math_code", "eval=code"], "field 'eval.downstream[0].name': 'code' names an earlier part too"),
])
def test_a_bad_set_is_one_line_naming_the_field(overrides, needle):
    with pytest.raises(ConfigError) as err:
        compose_run_config(overrides)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_the_largest_seed_the_schema_allows_evaluates(code_set):
    """seed = 2**63 - 1 (MAX_SEED): the eval stream's seed is reduced modulo 2**64 instead of overflowing
    torch.manual_seed; a small seed keeps the stream of the unreduced sum."""
    from rlscale.config.schema import MAX_SEED
    from rlscale.core.seeds import derived_seed

    problems = code_set.task.val_problems()
    result = evaluate(code_set.task, Tok(), CoinGenerator(problems), problems, 1, MAX_SEED, 0)
    assert result.val_samples == 12 and 0.0 <= result.val_reward <= 1.0
    assert derived_seed(7_919_000_000, MAX_SEED, 5) == (7_919_000_000 + 1_000_003 * MAX_SEED + 5) % 2 ** 64
    assert derived_seed(7_919_000_000, 3, 5) == 7_919_000_000 + 3_000_009 + 5
