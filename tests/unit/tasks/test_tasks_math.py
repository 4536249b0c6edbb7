"""The math task: file readers (verl parquet, Polaris jsonl, plain columns, CHAMP), the held-out split, and
Math-Verify rewards on real ground truths (Section 2: +1/-1 checked after stripping the think trace)."""
from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest

from rlscale.config.registry import TASK
from rlscale.core.types import split_think
from rlscale.tasks import math as math_task
from rlscale.tasks.base import TaskConfig
from rlscale.tasks.champ import final_answer
from rlscale.tasks.math import (VERIFY_TIMEOUT_S, MathTask, MathTaskConfig, OffThreadVerifier, held_out_split,
                                math_verify_correct, read_problems)
from rlscale.tasks.reasoning_gym import ReasoningGymConfig

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
TRAIN = DATA / "math__sampled_1_100_512.parquet"
VAL = DATA / "math__full_difficulty_ordered_test_500.parquet"
needs_data = pytest.mark.skipif(not TRAIN.is_file(), reason=f"shared verl parquet files not found in {DATA}")
needs_champ = pytest.mark.skipif(importlib.util.find_spec("champ_dataset") is None,
                                 reason="champ-dataset not installed (pip install champ-dataset)")

# Ground truths as they appear in shared/data (verl parquet), with answers in other surface forms.
REAL_ANSWERS = {
    "\\frac{1}{2}": (["\\boxed{\\frac{1}{2}}", "1/2", "0.5", "The answer is $\\frac12$.",
                      "So the probability is \\boxed{\\dfrac{1}{2}}."],
                     ["\\boxed{\\frac{1}{3}}", "2", "The answer is 1/4."]),
    "\\\\frac{3}{4}": (["\\boxed{\\frac{3}{4}}", "$0.75$", "The answer is 3/4"], ["\\boxed{\\frac{4}{3}}"]),
    "2\\sqrt{2}": (["\\boxed{2\\sqrt{2}}", "$\\sqrt{8}$", "The answer is $2 \\sqrt 2$."], ["\\boxed{2\\sqrt{3}}", "2"]),
    "(2,4)": (["\\boxed{(2,4)}", "$(2, 4)$", "The point is \\boxed{(2, 4)}."], ["\\boxed{(4,2)}"]),
    "(-\\infty, 0]": (["\\boxed{(-\\infty,0]}", "$(-\\infty, 0]$"], ["\\boxed{(-\\infty,0)}", "\\boxed{[0,\\infty)}"]),
    "(3,4]": (["\\boxed{(3,4]}", "$(3, 4]$"], ["\\boxed{[3,4]}"]),
    "(-\\infty, 2) \\cup (3, \\infty)": (["\\boxed{(-\\infty,2)\\cup(3,\\infty)}"], ["\\boxed{(2,3)}"]),
    "6.25": (["\\boxed{6.25}", "6.25", "$\\frac{25}{4}$"], ["\\boxed{6.5}"]),
    "\\text{Evelyn}": (["\\boxed{\\text{Evelyn}}", "\\boxed{Evelyn}"], ["\\boxed{\\text{Bob}}"]),
    "-\\frac{\\pi}{6}": (["\\boxed{-\\frac{\\pi}{6}}", "$-\\pi/6$"], ["\\boxed{\\frac{\\pi}{6}}"]),
    "6 - 5i": (["\\boxed{6-5i}", "$6 - 5i$"], ["\\boxed{6+5i}"]),
    "\\left( 3, \\frac{\\pi}{2} \\right)": (["\\boxed{\\left(3,\\frac{\\pi}{2}\\right)}", "\\boxed{(3, \\pi/2)}"],
                                           ["\\boxed{(3, \\pi)}"]),
    "18": (["18", "\\boxed{18}", "The answer is 18.", "She makes $18 every day.", "\\boxed{18.0}"],
           ["17", "\\boxed{180}", ""]),
}


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _polaris(tmp_path: Path, n: int = 12) -> Path:
    rows = [{"problem": f"What is {i} + {i}?", "answer": str(2 * i), "difficulty": "3/8"} for i in range(n)]
    return _write_jsonl(tmp_path / "polaris.jsonl", rows)


@needs_data
def test_real_ground_truths_are_from_the_shared_data():
    import pyarrow.parquet as pq

    truths = {r["ground_truth"] for f in DATA.glob("*.parquet")
              for r in pq.read_table(f, columns=["reward_model"]).column("reward_model").to_pylist()}
    assert set(REAL_ANSWERS) <= truths


@pytest.mark.parametrize("gold", list(REAL_ANSWERS))
def test_math_verify_accepts_equivalent_forms_and_rejects_wrong_answers(gold):
    right, wrong = REAL_ANSWERS[gold]
    assert [math_verify_correct(gold, a) for a in right] == [True] * len(right)
    assert [math_verify_correct(gold, a) for a in wrong] == [False] * len(wrong)


def test_the_think_trace_is_stripped_before_verification(tmp_path):
    task = MathTask(MathTaskConfig(path=str(_polaris(tmp_path)), val_size=2))
    problem = next(p for p in task.train_problems() + task.val_problems() if p.answer == "18")
    right = "<think>Maybe 17? No: 9 + 9 = 18.</think> The answer is \\boxed{18}."
    wrong = "<think>9 + 9 = 18, so the answer is 18.</think> \\boxed{17}"
    assert task.is_correct(problem, split_think(right)[1])
    assert not task.is_correct(problem, split_think(wrong)[1])
    assert not task.is_correct(problem, split_think("<think>9 + 9 = 18 and the answer is \\boxed{18}")[1])


@pytest.mark.parametrize("answer", ["\\boxed{" * 500, "\\frac{", "x" * 20000, "\\boxed{10^{10^{10^{10}}}}"])
def test_malformed_or_runaway_answers_score_false_without_raising(answer):
    assert math_verify_correct("18", answer) is False


def test_unparsable_gold_scores_false():
    assert math_verify_correct("\\frac{", "\\boxed{1}") is False


RUNAWAY = "9^{9^{9^{9}}}"  # a reference that keeps sympy busy for good without a timeout


def scored_in_a_thread(pairs):
    """``math_verify_correct`` of (gold, answer) ``pairs`` called from a thread other than the main one."""
    results = []
    worker = threading.Thread(target=lambda: results.extend(math_verify_correct(g, a) for g, a in pairs))
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "verification hung"
    return results


def test_verification_off_the_main_thread_keeps_its_timeout():
    """Without SIGALRM (threads) the reference ``9^{9^{9^{9}}}`` would keep sympy busy for good (as an answer
    it states no value, so it never reaches Math-Verify); the worker process's main thread times it out
    after VERIFY_TIMEOUT_S and the threads' other answers are still scored."""
    start = time.monotonic()
    assert scored_in_a_thread([("\\frac{1}{2}", "\\boxed{0.5}"), ("\\frac{1}{2}", "\\boxed{2}"),
                               (RUNAWAY, "1"), ("18", "The answer is $\\boxed{18}$.")]) == [True, False, False, True]
    assert time.monotonic() - start < 4 * VERIFY_TIMEOUT_S


def test_a_stuck_verifier_process_is_replaced(monkeypatch):
    """Past the backstop the worker pool is terminated, the answer scores False, and a new pool serves the
    next call."""
    verifier = OffThreadVerifier(workers=1, backstop_s=1.0)
    monkeypatch.setattr(math_task, "OFF_THREAD", verifier)
    assert scored_in_a_thread([(RUNAWAY, "1")]) == [False]
    assert verifier._pool is None
    assert scored_in_a_thread([("18", "\\boxed{18}")]) == [True]


@needs_data
def test_verl_parquet_reader_takes_user_message_and_ground_truth():
    train, val = read_problems(str(TRAIN)), read_problems(str(VAL))
    assert (len(train), len(val)) == (512, 500)
    first = train[0]
    assert first.answer == "\\sqrt{193}"
    assert first.prompt.startswith("You are a knowledgeable math assistant.")
    assert "$(5, -3)$ and $(-7, 4)$" in first.prompt
    assert [p.index for p in train] == list(range(512))


@needs_data
def test_val_path_gives_the_held_out_split():
    task = MathTask(MathTaskConfig(path=str(TRAIN), val_path=str(VAL), train_size=10_000, val_size=10_000))
    assert (len(task.train_problems()), len(task.val_problems())) == (512, 500)
    capped = MathTask(MathTaskConfig(path=str(TRAIN), val_path=str(VAL), train_size=100, val_size=50))
    assert (len(capped.train_problems()), len(capped.val_problems())) == (100, 50)
    assert [p.index for p in capped.val_problems()] == list(range(50))


def test_verl_messages_in_jsonl_use_the_last_user_message(tmp_path):
    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Q{i}"}],
             "reward_model": {"ground_truth": i, "style": "rule"}} for i in range(3)]
    problems = read_problems(str(_write_jsonl(tmp_path / "verl.jsonl", rows)))
    assert [(p.prompt, p.answer) for p in problems] == [("Q0", "0"), ("Q1", "1"), ("Q2", "2")]


def test_polaris_jsonl_columns(tmp_path):
    problems = read_problems(str(_polaris(tmp_path, 5)))
    assert [(p.prompt, p.answer) for p in problems[:2]] == [("What is 0 + 0?", "0"), ("What is 1 + 1?", "2")]
    assert problems[4].meta == {"source": str(tmp_path / "polaris.jsonl"), "row": 4}


def test_plain_columns_named_in_the_config(tmp_path):
    path = _write_jsonl(tmp_path / "plain.jsonl", [{"question": "2+2?", "final": 4}, {"question": "3+3?", "final": 6}])
    task = MathTask(MathTaskConfig(path=str(path), prompt_key="question", answer_key="final", val_size=1))
    assert sorted(p.answer for p in task.train_problems() + task.val_problems()) == ["4", "6"]


def test_split_is_deterministic_disjoint_and_seeded(tmp_path):
    cfg = MathTaskConfig(path=str(_polaris(tmp_path, 30)), val_size=5, train_size=1000, seed=7)
    one, two = MathTask(cfg), MathTask(cfg)
    rows = lambda problems: [p.meta["row"] for p in problems]  # noqa: E731
    assert rows(one.val_problems()) == rows(two.val_problems())
    assert rows(one.train_problems()) == rows(two.train_problems())
    assert len(one.val_problems()) == 5
    assert sorted(rows(one.train_problems()) + rows(one.val_problems())) == list(range(30))
    assert [p.index for p in one.train_problems()] == list(range(25))
    other = MathTask(MathTaskConfig(path=cfg.path, val_size=5, seed=8))
    assert rows(other.val_problems()) != rows(one.val_problems())
    capped = MathTask(MathTaskConfig(path=cfg.path, val_size=5, train_size=10, seed=7))
    assert len(capped.train_problems()) == 10
    assert rows(capped.val_problems()) == rows(one.val_problems())


def build_task(cfg: TaskConfig):
    """The task ``cfg.name`` builds, through the registry as the trainer does."""
    return TASK.load(cfg.name)(cfg)


def test_registry_builds_the_named_task_and_math_has_no_demonstrations(tmp_path):
    task = build_task(MathTaskConfig(path=str(_polaris(tmp_path)), val_size=2))
    assert isinstance(task, MathTask)
    assert task.demonstration(task.train_problems()[0]) is None
    gym = build_task(ReasoningGymConfig(dataset="chain_sum", train_size=10, val_size=5))
    assert (gym.name, len(gym.train_problems())) == ("reasoning_gym/chain_sum", 10)


@pytest.mark.parametrize("rows, content, message", [
    ([{"question": "q", "answer": "1"}], None, "no column 'prompt' or 'problem'; set task.prompt_key"),
    ([{"problem": "q", "solution": "1"}], None, "no column 'answer' or 'reward_model'; set task.answer_key"),
    ([{"problem": "q", "answer": "1"}, {"problem": "q"}], None, "row 1: no column 'answer'"),
    ([{"problem": "", "answer": "1"}], None, "row 0 column 'problem': empty prompt"),
    ([{"problem": "q", "answer": [1, 2]}], None, "row 0 column 'answer': expected text or a number, got list"),
    ([{"prompt": [{"role": "system", "content": "s"}], "reward_model": {"ground_truth": "1"}}], None,
     "row 0 column 'prompt': the chat messages hold no user message"),
    ([{"prompt": "q", "reward_model": {"style": "rule"}}], None, "row 0 column 'reward_model': no 'ground_truth'"),
    (None, '{"problem": "q", "answer": "1"}\n{oops\n', "line 2: not valid JSON"),
    (None, "", "no rows"),
])
def test_bad_input_names_the_file_and_column(tmp_path, rows, content, message):
    path = tmp_path / "bad.jsonl"
    if rows is not None:
        _write_jsonl(path, rows)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl") as err:
        read_problems(str(path))
    assert message in str(err.value)


def test_bad_paths_and_sizes(tmp_path):
    with pytest.raises(ValueError, match="missing.jsonl: no such file"):
        read_problems(str(tmp_path / "missing.jsonl"))
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="data.csv: expected a .jsonl or .parquet file"):
        read_problems(str(tmp_path / "data.csv"))
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="broken.parquet: not a readable parquet file"):
        read_problems(str(tmp_path / "broken.parquet"))
    with pytest.raises(ValueError, match="^field 'task.path': not set"):
        MathTask(MathTaskConfig())
    with pytest.raises(ValueError, match="task.val_size=12: must leave training rows"):
        held_out_split(read_problems(str(_polaris(tmp_path))), val_size=12, train_size=10, seed=0)
    with pytest.raises(ValueError, match="field 'task.name': 'chess' is not one of"):
        build_task(TaskConfig(name="chess"))


@pytest.mark.parametrize("raw, final", [
    ("239", "239"),
    ("C(10, 5), or equivalently 252", "252"),
    ("5/14, or approximately 35.7%", "5/14"),
    ("C(n, 4), or an equivalent form such as n(n-1)(n-2)(n-3)/4!", "C(n, 4)"),
    ("100 (i.e., all values)", "100"),
    ("0 (none of the values)", "0"),
    ("-3 is the only possible value", "-3"),
    ("The limit exists and is equal to 2/3", "2/3"),
    ("No integer solutions", "No integer solutions"),
])
def test_champ_final_answer(raw, final):
    assert final_answer(raw) == final


@needs_champ
def test_champ_loader_ships_270_problems_with_math_verify_rewards():
    problems = read_problems("champ")
    assert len(problems) == 270
    assert problems[0].meta["identifier"] == "P_Combinatorics_1"
    assert problems[0].answer == "239"
    assert {p.meta["category"] for p in problems} == {"Combinatorics", "Inequality", "Number-Theory",
                                                      "Polynomial", "Sequence"}
    task = MathTask(MathTaskConfig(path="champ", val_size=20, seed=3))
    assert (len(task.train_problems()), len(task.val_problems())) == (250, 20)
    by_id = {p.meta["identifier"]: p for p in task.train_problems() + task.val_problems()}
    assert task.is_correct(by_id["P_Combinatorics_2"], "There are \\boxed{252} such strings.")
    assert not task.is_correct(by_id["P_Combinatorics_2"], "\\boxed{210}")
