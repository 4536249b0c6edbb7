"""The warm-up's careless answers: an integer answer is shifted, a code answer's last constant is shifted, and an
answer without an integer is kept (so a task of any answer kind can warm up the tiny model with noise)."""
from rlscale.engines.models.tiny_model import perturbed
from rlscale.tasks.base import Demonstration


def test_careless_answers_of_each_kind():
    assert perturbed(Demonstration("7+5", "12"), -3).answer == "9"
    assert perturbed(Demonstration("", "-4"), 2).answer == "-2"
    code = Demonstration("", "def f(x):\n    return x * 3 + 2")
    assert perturbed(code, 1).answer == "def f(x):\n    return x * 3 + 3"
    assert perturbed(Demonstration("", "def f(s): return s[::-1]"), 1).answer == "def f(s): return s[::0]"
    plain = Demonstration("", "def f(a, b): return max(a, b)")
    assert perturbed(plain, 5) == plain
