"""The Task interface: prompts with reference answers, a fixed held-out split, and a verifier.

Rewards are +1 / -1 for correct / incorrect (Section 2); a Task only says whether an answer is correct.
The completion given to ``is_correct`` is the model's text after the ``</think>`` marker (the trace is
stripped first, as the paper does before Math-Verify).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Protocol

from rlscale.config.schema import MAX_SEED
from rlscale.knobs import knob

TASK_NAME = ("``reasoning_gym``: any reasoning-gym task by name (``dataset``); ``math``: local jsonl/parquet problems "
             "scored with Math-Verify; ``code``: small Python functions run on hidden tests in a sandbox; ``mixture``: "
             "several of them (``mixture.parts``)")
PROMPT_STYLES = ("expression", "question")  # a compact line for the char-level tiny model, or a chat model's sentence


@dataclass
class TaskConfig:
    """Prompts with reference answers and a verifier; rewards are +1 / -1 (Sec. 2). The knobs every task has; each
    option's config class (the annotation of its task class's ``cfg``) adds its own, and the fields' bounds and the
    task class's own checks (its ``config_problems``) refuse a bad value as the config is composed, before any
    compute."""

    name: str = knob("reasoning_gym", TASK_NAME, "Sec. 2")
    train_size: int = knob(2000, "training prompts (math: at most this many rows)", gt=0)
    val_size: int = knob(400, "held-out validation prompts, none a training prompt; the eval is their mean pass "
                         "rate. Refused as the config is composed when it leaves no training prompt among the code "
                         "task's prompts, a math file's rows (without ``val_path``) or the distinct prompts of "
                         "reasoning-gym's chain_sum and products (counted from their arguments); other "
                         "reasoning-gym tasks refuse as the split is drawn when they give fewer", "Sec. 2", gt=0)
    answer_format: str = knob("exact", "how the answer is asked for and checked (``rlscale.tasks.answer_format``)",
                              "Sec. 2")
    seed: int = knob(1234, "seed of the task's problems and of the held-out split", ge=0, le=MAX_SEED)

@dataclass(frozen=True)
class Problem:
    """One prompt. ``index`` is its position in its split (stable across runs for the same config)."""

    index: int
    prompt: str
    answer: str
    meta: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Demonstration:
    """A supervised target for the warm-up of the embedded model: think trace and final answer."""

    think: str
    answer: str


class Task(Protocol):
    """A task class, built from its config: a ``TaskConfig``, or the subclass its ``cfg`` argument is annotated with
    (the option's own knobs; a plug-in's too), which types the config section it is named in. It may also give a
    classmethod ``config_problems(cfg, where) -> List[str]``: one line per problem of the config beyond its fields'
    bounds, ``field '<where>.<field>': ...``, found without building it; validation calls it as the config is
    composed (reasoning_gym's and math's check names, generator arguments, files and split sizes)."""

    name: str

    def train_problems(self) -> List[Problem]:
        ...

    def val_problems(self) -> List[Problem]:
        ...

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        ...

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        """A worked solution for the supervised warm-up, or None when the task has none."""
        ...

