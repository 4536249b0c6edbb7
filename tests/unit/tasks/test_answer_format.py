"""Answer formats for chat models (``task.answer_format``) and thinking as a setting (``generation.think``),
with hand-written completions: a chat answer such as "The answer is 9." scores as correct under
Math-Verify and under reasoning-gym's ``<answer>`` tags, and as incorrect under exact match, on a
reasoning-gym task and on a math file."""
from __future__ import annotations

import json

import pytest

from rlscale.config.compose import ConfigError, compose_run_config, typed
from rlscale.core.types import Completion
from rlscale.engines.models.thinking import resolve_think, template_thinks
from rlscale.tasks.answer_format import TAGGED_INSTRUCTION
from rlscale.train.components import build_task
from rlscale.train.rollouts import score_completion

SUMS = ["task=chain_sum", "task.prompt_style=question", "task.train_size=40", "task.val_size=10",
        "+task.dataset_kwargs.min_terms=2", "+task.dataset_kwargs.max_terms=2"]


def task_of(*overrides):
    return build_task(typed(compose_run_config(list(overrides))))


def chat_answer(text: str, thinks: bool = False) -> Completion:
    return Completion(prompt_ids=[1], tokens=[5] * 8, gen_logp=[0.0] * 8, sampled=[True] * 8, versions=[0] * 8,
                      text=text, thinks=thinks)


def first_with_answer(task, answer: str):
    return next(p for p in task.train_problems() if p.answer == answer)


@pytest.fixture
def sums_file(tmp_path):
    path = tmp_path / "sums.jsonl"
    rows = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(1, 10) for b in range(1, 10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_math_verify_scores_a_sentence_on_a_reasoning_gym_sum():
    task = task_of(*SUMS, "task.answer_format=math_verify")
    nine = first_with_answer(task, "9")
    assert score_completion(task, nine, chat_answer("The answer is 9.")) is True
    assert score_completion(task, nine, chat_answer("\\boxed{9}")) is True
    assert score_completion(task, nine, chat_answer("The answer is 8.")) is False
    assert score_completion(task, nine, chat_answer("")) is False
    assert nine.prompt.startswith("State the final answer")  # the prompt is the task's


def test_math_verify_scores_a_sentence_on_a_math_file(sums_file):
    task = task_of("task=math", f"task.path={sums_file}", "task.val_size=5", "task.answer_format=math_verify")
    nine = first_with_answer(task, "9")
    assert score_completion(task, nine, chat_answer("The answer is 9.")) is True
    assert score_completion(task, nine, chat_answer("The answer is 10.")) is False


def test_exact_match_keeps_reasoning_gym_scoring():
    task = task_of(*SUMS)
    nine = first_with_answer(task, "9")
    assert score_completion(task, nine, chat_answer("9")) is True
    assert score_completion(task, nine, chat_answer("The answer is 9.")) is False


def test_tagged_states_the_format_and_reads_the_last_tag():
    task = task_of(*SUMS, "task.answer_format=tagged")
    nine = first_with_answer(task, "9")
    assert nine.prompt.endswith(TAGGED_INSTRUCTION)
    assert all(p.prompt.endswith(TAGGED_INSTRUCTION) for p in task.val_problems())
    assert score_completion(task, nine, chat_answer("4 + 5 is 9, so <answer>9</answer>")) is True
    assert score_completion(task, nine, chat_answer("<answer>8</answer> no, <answer> 9 </answer>")) is True
    assert score_completion(task, nine, chat_answer("<answer>8</answer>")) is False
    assert score_completion(task, nine, chat_answer("The answer is 9.")) is False  # no tag, no answer
    assert task.extract(nine, "so <answer>9</answer>") == "9" and task.extract(nine, "9") is None


def test_with_thinking_only_the_text_after_the_trace_is_the_answer():
    task = task_of(*SUMS, "task.answer_format=math_verify")
    nine = first_with_answer(task, "9")
    assert score_completion(task, nine, chat_answer("4+5=9</think>The answer is 9.", thinks=True)) is True
    assert score_completion(task, nine, chat_answer("4+5=9, the answer is 9.", thinks=True)) is False
    truncated = chat_answer("The answer is 9.")
    truncated.truncated = True
    assert score_completion(task, nine, truncated) is False


def test_think_setting_is_validated_and_auto_follows_the_chat_template():
    assert compose_run_config(["generation.think=false", "length=penalty"]).generation.think is False
    assert compose_run_config([]).generation.think == "auto"
    with pytest.raises(ConfigError, match=r"^overrides generation.think=false: field 'generation.think': .*"
                                          r"length=interruption"):
        compose_run_config(["generation.think=false"])
    with pytest.raises(ConfigError, match="field 'generation.think': must be true, false or auto, got 'yes'"):
        compose_run_config(["generation.think=yes"])
    with pytest.raises(ConfigError, match="field 'task.answer_format': 'boxed' is not one of"):
        compose_run_config(["task.answer_format=boxed"])
    qwen3 = "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>{%- endif %}"
    smollm2 = "{% for message in messages %}<|im_start|>{{ message['role'] }}{% endfor %}"
    assert template_thinks(qwen3) and not template_thinks(smollm2) and not template_thinks(None)
    assert resolve_think("auto", True, "interruption") is True
    assert resolve_think("auto", False, "penalty") is False
    assert resolve_think(True, False, "interruption") is True
    with pytest.raises(ValueError, match=r"^field 'generation.think': auto resolved to false"):
        resolve_think("auto", False, "interruption")
