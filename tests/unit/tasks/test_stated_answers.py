"""An answer is correct only when it states a value (``rlscale.tasks.stated``): the question repeated, an
expression equal to the answer, a restatement with a wrong result and a list of candidates are incorrect
under every answer format of the registry, on reasoning-gym families and on a math file, while correct
values (plain numbers and MATH-style LaTeX, equal by value) stay correct."""
from __future__ import annotations

import json

import pytest

from rlscale.config.compose import compose_run_config, typed
from rlscale.config.registry import ANSWER_FORMAT
from rlscale.tasks.math import math_verify_correct
from rlscale.tasks.stated import stated_answer, stated_value
from rlscale.train.components import build_task

# (answer text, reference, the value it states or None): what the rule reads.
STATED = [
    ("1050", "1050", "1050"),
    ("The answer is 1050.", "1050", "1050"),
    ("\\boxed{1050}", "1050", "1050"),
    ("**1,050**", "1050", "1,050"),
    ("-3", "-3", "-3"),
    ("The answer is $-3.5$.", "-3.5", "-3.5"),
    ("42 * 25 = 1050", "1050", "1050"),  # a restatement ending in the value states the value
    ("42 * 25 = 1040", "1050", "1040"),  # ... and a wrong one the wrong value
    ("To calculate 7 - 2, subtract 2 from 7. The result is 5, which answers 7 - 2.", "5", "5"),
    ("6 + 6 = 12\n\n6 + 6 = 12", "12", "12"),
    ("4 + 5 = 9, and 9 is the answer", "9", "9"),
    ("12 cm", "12", "12"),
    ("3/4", "\\frac{3}{4}", "3/4"),  # a fraction in lowest terms is a value
    ("\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}", "\\dfrac{1}{2}"),
    ("$2 \\sqrt 2$", "2\\sqrt{2}", "2 \\sqrt 2"),
    ("$6 - 5i$", "6 - 5i", "6 - 5i"),  # 5i is a term, not a number
    ("\\boxed{(-\\infty, 0]}", "(-\\infty, 0]", "(-\\infty, 0]"),
    ("The point is \\boxed{(2, 4)}.", "(2,4)", "(2, 4)"),
    ("42 * 25", "1050", None),
    ("3 + 4 + 5", "12", None),
    ("35*3 + 35 + 93 + 55", "288", None),
    ("The answer is $42 \\times 25$.", "1050", None),
    ("1050 = 42 * 25", "1050", None),  # the value is the left side; the statement ends in an expression
    ("(42)(25)", "1050", None),
    ("2^{10}", "1024", None),
    ("5 - -3", "8", None),
    ("6/8", "\\frac{3}{4}", None),  # a fraction not in lowest terms is arithmetic left undone
    ("\\frac{84}{7}", "12", None),
    ("1049, 1050, 1051", "1050", None),
    ("1050 or 1051", "1050", None),
    ("It is either 1051 or 1050.", "1050", None),
    ("1050\n1051", "1050", None),
    ("\\boxed{1050} \\boxed{1051}", "1050", None),
    ("\\boxed{1050", "1050", None),
    ("4 * 25 + 3", "25 * 4 + 3", "4 * 25 + 3"),  # a reference that is an expression (countdown) accepts them
]

# (reference, answer text, correct): Math-Verify's equality of values behind the rule.
MATH_VERIFY = [
    ("1050", "1050", True),
    ("1050", "1,050", True),
    ("1050", "The answer is $1{,}050$.", True),
    ("1050", "42 * 25 = 1050", True),
    ("-7", "The answer is -7.", True),
    ("3.5", "3.50", True),
    ("0.5", "50%", True),
    ("12", "\\boxed{12 \\text{ cm}}", True),
    ("\\frac{1}{2}", "0.5", True),
    ("\\frac{1}{2}", "1/2", True),
    ("\\frac{1}{2}", "\\frac12", True),
    ("\\frac{3}{4}", "3/4", True),
    ("-\\frac{\\pi}{6}", "$-\\pi/6$", True),
    ("2\\sqrt{2}", "\\boxed{2\\sqrt{2}}", True),
    ("6 - 5i", "6-5i", True),
    ("(-\\infty, 2) \\cup (3, \\infty)", "\\boxed{(-\\infty,2)\\cup(3,\\infty)}", True),
    ("1, 2", "\\boxed{1, 2}", True),  # a list where the reference is one
    ("1050", "42 * 25", False),
    ("12", "3 + 4 + 5", False),
    ("288", "35*3 + 35 + 93 + 55", False),
    ("1050", "42 * 25 = 1040", False),
    ("1050", "1050 or 1051", False),
    ("\\frac{3}{4}", "6/8", False),
    ("\\frac{3}{4}", "\\frac{6}{8}", False),
]


@pytest.mark.parametrize("text, reference, stated", STATED)
def test_what_an_answer_states(text, reference, stated):
    assert stated_value(text, reference) == stated


def test_a_repeated_prompt_states_nothing():
    question = "Janet has 16 eggs. She eats 3 and bakes with 4. How many are left?"
    assert stated_value(question, "9", prompt=question) is None
    assert stated_value(f"{question} She has 9 left.", "9", prompt=question) == "9"
    assert stated_answer(question) == "4"  # without the prompt, its last number would be read


@pytest.mark.parametrize("reference, text, correct", MATH_VERIFY)
def test_math_verify_compares_stated_values(reference, text, correct):
    assert math_verify_correct(reference, text) is correct


@pytest.fixture(scope="module")
def products_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("math") / "products.jsonl"
    rows = [{"prompt": f"What is {a} * {b}?", "answer": str(a * b)} for a in range(11, 31) for b in range(21, 26)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


FAMILIES = {
    "chain_sum": ["task.dataset=chain_sum"],
    "basic_arithmetic": ["task.dataset=basic_arithmetic", "+task.dataset_kwargs.max_terms=3",
                         "+task.dataset_kwargs.max_digits=2"],
    "gsm_symbolic": ["task.dataset=gsm_symbolic"],
    "products": ["task.dataset=products", "+task.dataset_kwargs.max_digits=2"],
}


def tasks_in_every_format(products_file):
    """(family, format, task) for reasoning-gym families and a math file, in each registered format."""
    sources = {**{name: ["task.prompt_style=question", *overrides] for name, overrides in FAMILIES.items()},
               "math file": ["task=math", f"task.path={products_file}"]}
    for fmt in ANSWER_FORMAT.names:
        for name, overrides in sources.items():
            yield name, fmt, build_task(typed(compose_run_config(
                [*overrides, "task.train_size=20", "task.val_size=8", f"task.answer_format={fmt}"])))


def renderings(text: str):
    """``text`` as a bare answer, a sentence, a box and a tag: whatever the format reads."""
    return [text, f"The answer is {text}.", f"\\boxed{{{text}}}", f"<answer>{text}</answer>"]


def hacks(problem):
    """Answers that state no correct value: the question repeated, expressions equal to the answer, a
    restatement with a wrong result, and lists of candidates holding the answer."""
    entry = problem.meta.get("entry", {})
    expression = entry.get("metadata", {}).get("expression") or problem.prompt.removeprefix("What is ").rstrip("?")
    value = int(float(problem.answer))
    texts = [problem.prompt, entry.get("question", problem.prompt), expression, f"{expression} =",
             f"{value + 7} - 7", f"{value} * 1", f"({value - 2}) + (2)",
             f"{expression} = {value + 1}",
             f"{value - 1}, {value}, {value + 1}", f"{value} or {value + 1}", f"{value + 1} or {value}",
             f"{value}\n{value + 1}", f"\\boxed{{{value}}} \\boxed{{{value + 1}}}"]
    return [r for text in texts for r in renderings(text)]


def test_hacks_are_incorrect_and_values_correct_in_every_format(products_file):
    checked = set()
    for name, fmt, task in tasks_in_every_format(products_file):
        for problem in task.val_problems()[:4]:
            scored = [h for h in hacks(problem) if task.is_correct(problem, h)]
            assert scored == [], (name, fmt, problem.prompt, problem.answer)
            correct = [r for r in renderings(problem.answer) if task.is_correct(problem, r)]
            assert correct, (name, fmt, problem.prompt, problem.answer)
        checked.add((name, fmt))
    assert {fmt for _, fmt in checked} == set(ANSWER_FORMAT.names)


def test_the_embedded_default_rewards_correct_answers():
    """chain_sum as the embedded default composes it (exact match on the expression prompts): the reference
    and the warm-up demonstrations' answers score, the expression and the prompt repeated do not."""
    task = build_task(typed(compose_run_config([])))
    for problem in task.val_problems()[:50]:
        expression = problem.meta["entry"]["metadata"]["expression"]
        assert task.is_correct(problem, problem.answer)
        assert task.is_correct(problem, task.demonstration(problem).answer)
        assert not task.is_correct(problem, expression)
        assert not task.is_correct(problem, problem.prompt)
