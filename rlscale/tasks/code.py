"""Write a small Python function: "f(x): x times 3 plus 2" -> ``def f(x): return x * 3 + 2``, checked by running
the answer against hidden tests in the sandbox (``rlscale.tasks.sandbox``).

The prompts come from ``FAMILIES`` (arithmetic on one number, the larger or smaller of two, a list reversed or
summed, a string repeated), each with its constants: a fixed space of distinct prompts. ``task.seed`` shuffles
it; the first ``task.val_size`` prompts are held out for validation and the next ``task.train_size`` (at most
the rest) train, so no validation prompt is a training prompt. ``task.prompt_style`` ``expression`` asks in a
compact line for the char-level tiny model ("f(x): x times 3 plus 2"), ``question`` in a sentence for a chat
model, which is asked for a ```python block.

The answer is the first ```python (or bare ```) block of the text after ``</think>``, else the whole text. It is
correct when, run in the sandbox, it defines ``f`` and ``f`` returns the expected value, of the expected type,
on every hidden test input. The harness prints a random token after the last test, so an answer that exits
early passes nothing. The check resists accidental passes (early exits, objects equal to everything), not code
written to read the harness.
"""
from __future__ import annotations

import itertools
import random
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Mapping, Optional, Sequence, Tuple

from rlscale.knobs import bound_problems, knob
from rlscale.tasks.base import PROMPT_STYLES, TASK_NAME, Demonstration, Problem, TaskConfig
from rlscale.tasks.sandbox import Limits, run_python

NUMBERS = ((-7,), (0,), (1,), (5,), (12,), (100,))
PAIRS = ((3, 8), (8, 3), (-2, -5), (4, 4))
LISTS = (([],), ([7],), ([3, 1, 2],), ([5, -2, 9, 9],))
STRINGS = (("",), ("a",), ("ab",), ("xyz",))
LIMITS = Limits(cpu_s=2, wall_s=5.0)
FENCED = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Family:
    """Functions of one shape. params: ``f``'s parameters; body: the returned expression and says: its words,
    both with the placeholders of ``constants`` (name -> values); inputs: the argument tuples of the hidden
    tests."""

    params: str
    body: str
    says: str
    inputs: Tuple[tuple, ...]
    constants: Mapping[str, range]

    def instances(self) -> List[Tuple[str, str]]:
        """(body, says) for every choice of the constants, in a fixed order."""
        names = list(self.constants)
        return [(self.body.format(**dict(zip(names, values))), self.says.format(**dict(zip(names, values))))
                for values in itertools.product(*(self.constants[n] for n in names))]


FAMILIES: Tuple[Family, ...] = (
    Family("x", "x + {k}", "x plus {k}", NUMBERS, {"k": range(1, 100)}),
    Family("x", "x - {k}", "x minus {k}", NUMBERS, {"k": range(1, 100)}),
    Family("x", "x * {k}", "x times {k}", NUMBERS, {"k": range(2, 100)}),
    Family("x", "x * {a} + {b}", "x times {a} plus {b}", NUMBERS, {"a": range(2, 10), "b": range(1, 100)}),
    Family("x", "x * {a} - {b}", "x times {a} minus {b}", NUMBERS, {"a": range(2, 10), "b": range(1, 100)}),
    Family("x", "x // {k}", "x divided by {k}, rounded down", NUMBERS, {"k": range(2, 10)}),
    Family("x", "x % {k}", "the remainder of x divided by {k}", NUMBERS, {"k": range(2, 10)}),
    Family("a, b", "max(a, b)", "the larger of a and b", PAIRS, {}),
    Family("a, b", "min(a, b)", "the smaller of a and b", PAIRS, {}),
    Family("a, b", "a * b + {k}", "a times b plus {k}", PAIRS, {"k": range(1, 100)}),
    Family("xs", "xs[::-1]", "the list xs reversed", LISTS, {}),
    Family("xs", "sum(xs) + {k}", "the sum of the list xs plus {k}", LISTS, {"k": range(1, 100)}),
    Family("s", "s * {k}", "the string s repeated {k} times", STRINGS, {"k": range(2, 10)}),
)

# Runs the answer's code, then calls its f on each input and compares value and type (nested); {tests} is the
# literal of a tuple of (arguments, expected) pairs, {token} the line printed when all pass.
HARNESS = '''
def _same(got, want):
    if type(got) is not type(want):
        return False
    if isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return got == want
_answer = {{"__name__": "answer"}}
exec(compile({code!r}, "answer.py", "exec"), _answer)
for _args, _want in {tests}:
    assert _same(_answer["f"](*_args), _want), _args
print({token!r})
'''


def answer_code(answer_text: str) -> str:
    """The code of an answer: its first fenced block (```python, ```py or bare), else the whole text."""
    fenced = FENCED.search(answer_text)
    return fenced.group(1) if fenced else answer_text


@lru_cache(maxsize=65536)
def passes(code: str, tests: str) -> bool:
    """Whether ``code`` defines ``f`` with ``f(*args) == expected`` (same type) for every test of ``tests`` (the
    literal of (arguments, expected) pairs), run in the sandbox; cached, since a policy repeats its answers."""
    token = secrets.token_hex(16)
    result = run_python(HARNESS.format(code=code, tests=tests, token=token), LIMITS)
    return result.passed and result.stdout.strip().endswith(token)


def _expected(params: str, body: str, inputs: Sequence[tuple]) -> str:
    """The literal of (arguments, f's value) of each input, for a body of ``FAMILIES`` (rlscale's own code,
    evaluated here; answers run only in the sandbox)."""
    function = eval(f"lambda {params}: {body}")
    return repr(tuple((args, function(*args)) for args in inputs))


@lru_cache(maxsize=1)
def prompt_space() -> Tuple[Tuple[Family, str, str], ...]:
    """(family, body, says) of every distinct prompt, in ``FAMILIES``' order."""
    return tuple((family, body, says) for family in FAMILIES for body, says in family.instances())


PROMPTS = len(prompt_space())  # 2,105


@dataclass
class CodeTaskConfig(TaskConfig):
    """Small Python functions from a fixed space of distinct prompts (``task.name=code``)."""

    name: str = knob("code", TASK_NAME, "Sec. 2")
    val_size: int = knob(400, "held-out validation prompts, the first of the seeded shuffle of the code task's "
                         f"{PROMPTS:,} prompts; below that, so the next ``train_size`` (at most the rest) train",
                         "Sec. 2", gt=0, lt=PROMPTS)
    answer_format: str = knob("exact", "how the answer is asked for and checked (``rlscale.tasks.answer_format``); "
                              "not math_verify: the answer is run as code", "Sec. 2", one_of=("exact", "tagged"))
    prompt_style: str = knob("expression", "``expression``: a compact line for the char-level tiny model (\"f(x): x "
                             "times 3 plus 2\"); ``question``: a sentence asking a chat model for a fenced python "
                             "block",
                             one_of=PROMPT_STYLES)


class CodeTask:
    """Small Python functions from ``FAMILIES``, scored by running the answer in the sandbox on hidden tests."""

    name = "code"

    def __init__(self, cfg: CodeTaskConfig):
        problems = bound_problems(cfg, "task")  # checked as the config is composed; here for a config built in code
        if problems:
            raise ValueError(problems[0])
        space = list(prompt_space())
        random.Random(cfg.seed).shuffle(space)
        self._style = cfg.prompt_style
        self._val = [self._problem(i, *entry) for i, entry in enumerate(space[:cfg.val_size])]
        self._train = [self._problem(i, *entry)
                       for i, entry in enumerate(space[cfg.val_size:cfg.val_size + cfg.train_size])]

    def _problem(self, index: int, family: Family, body: str, says: str) -> Problem:
        if self._style == "expression":
            prompt = f"f({family.params}): {says}"
        else:
            prompt = (f"Write a Python function `f({family.params})` that returns {says}. "
                      "Reply with the code in a ```python block.")
        code = f"def f({family.params}):\n    return {body}"
        return Problem(index=index, prompt=prompt, answer=code,
                       meta={"body": body, "tests": _expected(family.params, body, family.inputs)})

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        """The answer's code (``answer_code``) passes every hidden test in the sandbox (never raises)."""
        return passes(answer_code(answer_text), problem.meta["tests"])

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        """The returned expression as the trace, the reference function as the answer."""
        return Demonstration(think=problem.meta["body"], answer=problem.answer)
