"""A mixture of tasks (``task=math_code``): training prompts interleaved by weight, each answer scored by the
part its problem came from, per-part eval and train figures, and one-line errors for a bad mixture."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from rlscale.config.compose import ConfigError, compose_run_config, typed
from rlscale.config.schema import FLAT_DEFAULTS
from rlscale.core.types import Completion
from rlscale.tasks.mixture import MixtureTask, interleave, part_of
from rlscale.train.batch import ScoredGroup
from rlscale.train.checkpoint import RESUMABLE, RunIdentity
from rlscale.train.components import build_task
from rlscale.train.evaluate import evaluate
from rlscale.train.loop import part_metrics
from rlscale.train.rollouts import score_completion

SMALL = ["task=math_code", "mixture.parts.0.task.train_size=30", "mixture.parts.0.task.val_size=12",
         "mixture.parts.1.task.train_size=20", "mixture.parts.1.task.val_size=8"]


def answer(text: str) -> Completion:
    return Completion(prompt_ids=[1], tokens=[5] * 4, gen_logp=[0.0] * 4, sampled=[True] * 4, versions=[0] * 4,
                      text=text, thinks=False)


@pytest.fixture(scope="module")
def mixture() -> MixtureTask:
    return build_task(typed(compose_run_config(SMALL)))


def test_interleaving_keeps_every_prefix_at_its_share_and_stops_when_a_part_runs_out():
    assert interleave([3, 10], [1.0, 1.0]) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    order = interleave([100, 100], [1.0, 3.0])
    assert len(order) == 133  # part 1 runs out at its 100th prompt, after 33 of part 0
    for n in range(1, len(order) + 1):
        ones = sum(part for part, _ in order[:n])
        assert abs(ones - 0.75 * n) <= 1, n
    assert [i for part, i in order if part == 0] == list(range(33))  # each part in its own order


def test_the_mixture_holds_both_parts_with_their_own_prompts(mixture):
    train, val = mixture.train_problems(), mixture.val_problems()
    assert [p.index for p in train] == list(range(41)) and [p.index for p in val] == list(range(20))
    assert [part_of(p) for p in train[:4]] == ["math", "code", "math", "code"]
    assert [part_of(p) for p in val] == ["math"] * 12 + ["code"] * 8
    code = mixture.parts["code"].task
    assert [p.prompt for p in train if part_of(p) == "code"] == [p.prompt for p in code.train_problems()]
    assert sum(part_of(p) == "math" for p in train) == 21  # 20 each, then math's turn; code's next turn finds none
    assert [p.prompt for p in val if part_of(p) == "code"] == [p.prompt for p in code.val_problems()]


def test_each_answer_is_scored_by_its_own_part(mixture):
    math = next(p for p in mixture.train_problems() if part_of(p) == "math")
    code = next(p for p in mixture.val_problems() if part_of(p) == "code")
    assert score_completion(mixture, math, answer(math.answer)) is True
    assert score_completion(mixture, math, answer(str(int(math.answer) + 1))) is False
    assert score_completion(mixture, code, answer(code.answer)) is True  # the reference function passes its tests
    assert score_completion(mixture, code, answer(math.answer)) is False  # a number is no function
    assert mixture.demonstration(code).answer == code.answer


class ReferenceGenerator:
    """Answers every prompt with its reference answer when the prompt's position is even, else with "0";
    the test generator (no model) that makes the per-part figures hand-countable."""

    def __init__(self, problems):
        self.answers = {p.prompt: p.answer for p in problems}

    def generate(self, prompts, rng, version=0):
        return [answer(self.answers[p] if i % 2 == 0 else "0") for i, p in enumerate(prompts)]


class Tok:
    def encode_prompt(self, prompt):
        return prompt


def test_the_eval_gives_pooled_and_per_part_figures(mixture):
    val = mixture.val_problems()
    result = evaluate(mixture, Tok(), ReferenceGenerator(val), val, samples=1, seed=0, step=0)
    metrics = result.metrics()
    # even positions answer right: 6 of the 12 math prompts, 4 of the 8 code prompts (a math answer "0" is right
    # only where the sum is 0)
    zero_sums = sum(1 for i, p in enumerate(val[:12]) if i % 2 and p.answer == "0")
    assert metrics["val_reward/math"] == pytest.approx((6 + zero_sums) / 12)
    assert metrics["val_reward/code"] == pytest.approx(4 / 8)
    assert metrics["val_reward"] == pytest.approx((6 + zero_sums + 4) / 20)
    assert metrics["val_prompts/math"] == 12 and metrics["val_samples/code"] == 8
    assert metrics["val_reward_se/code"] == pytest.approx((0.25 * 8 / 7) ** 0.5 / 8 ** 0.5)
    assert list(metrics)[:5] == ["val_reward", "val_reward_se", "val_samples", "val_prompts", "val_truncation_rate"]


def test_train_lines_carry_each_parts_reward(mixture):
    train = mixture.train_problems()
    groups = [ScoredGroup(0, [answer("")] * 2, [True, False], [1.0, -1.0]),   # math
              ScoredGroup(1, [answer("")] * 2, [True, True], [1.0, 1.0]),     # code
              ScoredGroup(2, [answer("")] * 2, [False, False], [-1.0, -1.0])]  # math
    assert [part_of(train[g.prompt_index]) for g in groups] == ["math", "code", "math"]
    assert part_metrics(groups, train) == {"reward/code": 1.0, "pass_rate/code": 1.0, "samples/code": 2,
                                           "reward/math": -0.5, "pass_rate/math": 0.25, "samples/math": 4}


@pytest.mark.parametrize("overrides, needle", [
    (["task.name=mixture"], "field 'mixture.parts': task.name=mixture needs at least two parts, got 0"),
    (["task=math_code", "task.name=code"], "field 'mixture.parts': 2 parts, but task.name=code"),
    (["task=math_code", "mixture.parts.1.name=math"], "field 'mixture.parts[1].name': 'math' names an earlier entry"),
    (["task=math_code", "mixture.parts.0.name=a/b"], "field 'mixture.parts[0].name': name 'a/b' must match"),
    (["task=math_code", "mixture.parts.1.weight=0"], "field 'mixture.parts[1].weight': must be > 0, got 0.0"),
    (["task=math_code", "mixture.parts.1.task.name=mixture"],
     "field 'mixture.parts[1].task.name': a mixture cannot be nested"),
    (["task=math_code", "mixture.parts.0.task.name=maths"], "field 'mixture.parts[0].task.name': 'maths' is not"),
    (["task=math_code", "mixture.parts.0.task.answer_format=boxed"],
     "field 'mixture.parts[0].task.answer_format': 'boxed' is not"),
    (["task=math_code", "mixture.parts.0.weight=abc"], "field 'mixture.parts[0].weight': Value 'abc' of type 'str' "
                                                       "could not be converted to Float"),
    (["task=math_code", "+mixture.parts.1.wieght=2"], "field 'mixture.parts[1].wieght': Key 'wieght' not in "
                                                      "'MixturePart'"),
    (["task=math_code", "mixture.parts.1.task.dataset=products"],
     "field 'mixture.parts[1].task.dataset': mixture.parts[1].task.name=code has no such knob"),
])
def test_a_bad_mixture_is_one_line_naming_the_field(overrides, needle):
    with pytest.raises(ConfigError) as err:
        compose_run_config(overrides)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_run_without_a_mixture_keeps_its_config_hash():
    """The empty mixture and eval sections are left out of the run's identity: the hash is the one of the
    config's fields without them, as before they existed, so checkpoints written then still resume."""
    cfg = typed(compose_run_config([]))
    fields = asdict(cfg)
    for key in RESUMABLE:
        parent, _, leaf = key.rpartition(".")
        (fields[parent] if parent else fields).pop(leaf)
    del fields["mixture"], fields["eval"], fields["unread"]
    for later in ("activation_checkpointing", "generator_rows"):  # engine fields added since, at their defaults
        del fields["engine"][later]
    for section, flat in FLAT_DEFAULTS.items():  # the knobs one flat section per axis had, as it wrote them
        if section in fields:  # the launcher and the logger are not in the identity
            fields[section] = {**flat, **fields[section]}
    before = hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()
    assert RunIdentity.of(cfg, "r").config == before
    mixed = typed(compose_run_config(["task=math_code"]))
    assert RunIdentity.of(mixed, "r").config != before


def test_weights_change_the_rl_pool_and_not_the_warm_up(mixture):
    """The embedded model warms up on the evenly weighted mixture, whatever the weights (rlscale.engines.models.
    tiny_model.tiny_policy): a sweep over weights starts every variant from the same policy."""
    heavy = build_task(typed(compose_run_config([*SMALL, "mixture.parts.1.weight=3"])))
    assert [part_of(p) for p in heavy.train_problems()[:4]] == ["code", "code", "math", "code"]
    assert [p.prompt for p in heavy.evenly_weighted().train_problems()] == [p.prompt for p in mixture.train_problems()]


ESCAPES = ("import os\nwhile True: os.fork()", "while True: pass", "print('x' * 10**9)",
           "open('/tmp/rlscale-mixture-escape', 'w').write('x')", "import subprocess; subprocess.run(['ls'])",
           "import socket; socket.create_connection(('1.1.1.1', 80))", "import os; os.kill(os.getppid(), 9)",
           "import shutil; shutil.rmtree({kept!r})")


def test_escape_attempts_in_code_answers_score_zero_and_leave_the_run_unharmed(mixture, tmp_path):
    """Hostile answers to the code part are scored in the sandbox (rlscale.tasks.sandbox) like any answer: each
    fails, the scoring process lives on, no file appears outside the sandbox's folder, and both parts still
    score their reference answers right afterwards."""
    code = next(p for p in mixture.val_problems() if part_of(p) == "code")
    math = next(p for p in mixture.val_problems() if part_of(p) == "math")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "file").write_text("x")
    for source in ESCAPES:
        source = source.format(kept=str(kept))
        assert score_completion(mixture, code, answer(f"```python\n{source}\n```")) is False, source
    assert not Path("/tmp/rlscale-mixture-escape").exists() and (kept / "file").read_text() == "x"
    assert score_completion(mixture, code, answer(code.answer)) is True
    assert score_completion(mixture, math, answer(math.answer)) is True
