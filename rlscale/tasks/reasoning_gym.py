"""Any reasoning-gym task by name (offline procedural tasks with verifiers), with a fixed held-out split.

``task.dataset`` names the family (any task reasoning-gym registers: ``chain_sum``, ``basic_arithmetic``,
``gsm_symbolic``, ``products``, ...) and ``task.dataset_kwargs`` the arguments of its generator, each
checked against the family's config when the run's config is composed
(``ReasoningGymTask.config_problems``), before anything is generated. Only chain_sum has defaults of
rlscale's own (``DEFAULT_KWARGS``: 2-4 one-digit terms, a difficulty mix, so the embedded default's curve
saturates well below 1), which ``task.dataset_kwargs`` override key by key; every other family starts
from reasoning-gym's defaults.

The held-out split is ``task.val_size`` distinct prompts, none of them a training prompt, drawn with
another seed; a family whose space cannot give that many refuses: as the config is composed when the
family's count of distinct prompts (``SPACES``) leaves no training prompt, else as the split is drawn. For
the tasks whose entries carry an arithmetic ``expression`` the task also gives worked demonstrations
(running partial sums) for the supervised warm-up of the tiny model. An answer that states no value
(``rlscale.tasks.stated``: "3 + 4 + 5", "8 or 9") is incorrect whatever the family's verifier says.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional

from omegaconf import DictConfig, OmegaConf

from rlscale.knobs import knob
from rlscale.tasks.base import PROMPT_STYLES, Demonstration, Problem, TaskConfig
from rlscale.tasks.stated import stated_value, without_prompt

DEFAULT_KWARGS: Dict[str, Dict[str, Any]] = {
    "chain_sum": {"min_terms": 2, "max_terms": 4, "min_digits": 1, "max_digits": 1},
}
SET_BY_RLSCALE = {"seed": ("seed",), "size": ("train_size", "val_size")}  # generator argument -> task fields
EXAMPLES = ("chain_sum", "basic_arithmetic", "gsm_symbolic", "products")
VAL_SEED_OFFSET = 1_000_003
VAL_DRAWS_PER_PROMPT = 10  # draws of the validation seed per held-out prompt asked for, at most


@dataclass
class ReasoningGymConfig(TaskConfig):
    """A reasoning-gym task by name and the arguments of its generator (``task.name=reasoning_gym``)."""

    dataset: str = knob("chain_sum", "the task's name, any task reasoning-gym registers (``chain_sum``, "
                        "``basic_arithmetic``, ``gsm_symbolic``, ``products``, ...); another name is refused as the "
                        "config is composed, the closest one suggested")
    dataset_kwargs: dict = knob({}, "arguments of the task's generator, over its defaults (chain_sum's here: 2-4 "
                                "one-digit terms, a difficulty mix); a key the task's config does not have (the "
                                "closest one named) and values its ``validate()`` refuses are refused as the config "
                                "is composed. On the command line ``+task.dataset_kwargs.KEY=VALUE`` adds one")
    prompt_style: str = knob("expression", "``question`` (the dataset's text) or ``expression`` (the entry's "
                             "arithmetic expression followed by \" =\", a compact prompt for the char-level tiny "
                             "model; the question where an entry has none)", one_of=PROMPT_STYLES)


def family_configs() -> Mapping[str, type]:
    """Every task reasoning-gym registers -> its config class (importing reasoning_gym registers them)."""
    import reasoning_gym  # noqa: F401
    from reasoning_gym.factory import DATASETS

    return {name: config for name, (_, config) in DATASETS.items()}


def generator_kwargs(dataset: str, dataset_kwargs: Mapping) -> Dict[str, Any]:
    """``dataset``'s generator arguments: rlscale's defaults for it (``DEFAULT_KWARGS``) under
    ``dataset_kwargs``."""
    given = OmegaConf.to_container(dataset_kwargs) if isinstance(dataset_kwargs, DictConfig) else dict(dataset_kwargs)
    return {**DEFAULT_KWARGS.get(dataset, {}), **given}


def _capped_power(base: int, exponent: int, cap: int) -> int:
    """min(cap, base ** exponent) for base >= 1, without computing a power far beyond ``cap``."""
    if base > 1 and exponent * math.log2(base) > cap.bit_length() + 1:
        return cap
    return min(cap, base ** exponent)


def operand_chains(config: Any, operators: int, cap: int) -> int:
    """min(cap, the distinct expressions chain_sum's (``operators`` = 2: + and -) and products'
    (``operators`` = 1: *) generators write: ``min_terms``..``max_terms`` operands joined by operators, the
    operands of one expression all of one digit count d in ``min_digits``..``max_digits``: 0..9 for d = 1, else
    10^(d-1)..10^d - 1, so the counts add up over d; with ``allow_negation`` -(10^d - 1)..10^d - 1, nested in d,
    so the widest holds them all."""
    total = 0
    for terms in range(config.min_terms, config.max_terms + 1):
        if config.allow_negation:
            widths = [min(cap, 2 * _capped_power(10, config.max_digits, cap) - 1)]
        else:
            widths = (10 if d == 1 else min(cap, 9 * _capped_power(10, d - 1, cap))
                      for d in range(config.min_digits, config.max_digits + 1))
        for width in widths:
            total += _capped_power(width, terms, cap) * _capped_power(operators, terms - 1, cap)
            if total >= cap:
                return cap
    return total


# family -> (its config, cap) -> min(cap, its distinct prompts), for the families whose prompt is one fixed
# sentence around the expression (each prompt style then gives as many distinct prompts as expressions)
SPACES: Dict[str, Callable[[Any, int], int]] = {
    "chain_sum": lambda config, cap: operand_chains(config, 2, cap),
    "products": lambda config, cap: operand_chains(config, 1, cap),
}


def _refusal(where: str, dataset: str, kwargs: Mapping[str, Any], err: BaseException) -> str:
    """A generator's refusal of its arguments as one line naming the arguments its message names (all of them
    when it names none)."""
    named = [key for key in kwargs if re.search(rf"\b{re.escape(key)}\b", str(err))] or list(kwargs)
    why = " ".join(str(err).split()) or type(err).__name__
    if len(named) == 1:
        return f"field '{where}.dataset_kwargs.{named[0]}': {kwargs[named[0]]!r} refused by reasoning-gym's " \
               f"{dataset} ({why})"
    if named:
        shown = ", ".join(f"{key}={kwargs[key]!r}" for key in named)
        return f"field '{where}.dataset_kwargs': {shown} refused by reasoning-gym's {dataset} ({why})"
    return f"field '{where}.dataset': {dataset!r} refused by reasoning-gym with its default arguments ({why})"


@contextmanager
def _named_errors(dataset: str, kwargs: Mapping[str, Any]) -> Iterator[None]:
    """A generator's refusal of an argument's value, met as it generates, as ``_refusal``'s line."""
    try:
        yield
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        raise ValueError(_refusal("task", dataset, kwargs, err)) from None


class ReasoningGymTask:
    """Train and validation problems from ``reasoning_gym.create_dataset(cfg.dataset, ...)``; the
    validation split is ``cfg.val_size`` distinct prompts drawn with a different seed, none of them a
    training prompt, so it is held out by construction."""

    name: str  # reasoning_gym/<task.dataset>

    def __init__(self, cfg: ReasoningGymConfig):
        import reasoning_gym

        problems = self.config_problems(cfg, "task")
        if problems:
            raise ValueError(problems[0])
        self.name = f"reasoning_gym/{cfg.dataset}"
        self._style = cfg.prompt_style
        kwargs = generator_kwargs(cfg.dataset, cfg.dataset_kwargs)
        with _named_errors(cfg.dataset, kwargs):
            self._train_ds = reasoning_gym.create_dataset(cfg.dataset, size=cfg.train_size, seed=cfg.seed, **kwargs)
            self._train = [self._problem(i, e) for i, e in enumerate(self._train_ds)]
            val_ds = reasoning_gym.create_dataset(cfg.dataset, size=cfg.val_size * VAL_DRAWS_PER_PROMPT,
                                                  seed=cfg.seed + VAL_SEED_OFFSET, **kwargs)
            self._val = self._held_out(val_ds, cfg.val_size)
        if len(self._val) < cfg.val_size:
            raise ValueError(f"task.val_size={cfg.val_size}: reasoning-gym's {cfg.dataset} with these "
                             f"task.dataset_kwargs gave {len(self._val)} distinct prompts outside the training split "
                             f"in {len(val_ds):,} draws; lower task.val_size or task.train_size, or widen "
                             "task.dataset_kwargs")

    @classmethod
    def config_problems(cls, cfg: ReasoningGymConfig, where: str) -> List[str]:
        """What is wrong with ``cfg`` before anything is generated, one line per problem naming its field under
        ``where`` (``task``, ``mixture.parts[0].task``): a task reasoning-gym does not register (the closest
        name suggested); a ``dataset_kwargs`` key that its config class lacks (the closest field named) or
        that rlscale sets; values the config's own ``validate()`` refuses; and, for the families ``SPACES``
        counts, a ``val_size`` that leaves no training prompt among all the distinct prompts the family can
        give. The held-out split itself (distinct prompts outside the training split, within
        ``VAL_DRAWS_PER_PROMPT`` draws per prompt asked for) is checked as it is drawn, since that needs the
        generation: this bound refuses only the sizes no draw can give, and for the other families none."""
        configs = family_configs()
        if cfg.dataset not in configs:
            close = difflib.get_close_matches(cfg.dataset, configs, n=1)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"reasoning-gym registers {len(configs)}, such as {', '.join(EXAMPLES)}")
            return [f"field '{where}.dataset': {cfg.dataset!r} is not a reasoning-gym task; {hint}"]
        config_class = configs[cfg.dataset]
        accepted = [f.name for f in dataclasses.fields(config_class) if f.name not in SET_BY_RLSCALE]
        problems = []
        for key in cfg.dataset_kwargs:
            if key in SET_BY_RLSCALE:
                fields = " and ".join(f"{where}.{name}" for name in SET_BY_RLSCALE[key])
                problems.append(f"field '{where}.dataset_kwargs.{key}': set by {fields}")
            elif key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=1)
                problems.append(f"field '{where}.dataset_kwargs.{key}': not an argument of reasoning-gym's "
                                f"{cfg.dataset} (it takes {', '.join(accepted) or 'none'})"
                                + (f"; did you mean '{close[0]}'?" if close else ""))
        if problems:
            return problems
        kwargs = generator_kwargs(cfg.dataset, cfg.dataset_kwargs)
        try:
            config = config_class(**kwargs, seed=cfg.seed, size=cfg.train_size)
            if hasattr(config, "validate"):
                config.validate()
        except Exception as err:  # a family's validate() says what it refuses in any type (mostly assert)
            return [_refusal(where, cfg.dataset, kwargs, err)]
        count = SPACES.get(cfg.dataset)
        if count is not None and (space := count(config, cfg.val_size + 1)) <= cfg.val_size:
            return [f"field '{where}.val_size': {cfg.val_size} distinct held-out prompts, but reasoning-gym's "
                    f"{cfg.dataset} with these {where}.dataset_kwargs has {space:,} distinct prompts in all and the "
                    f"training split takes at least one; lower {where}.val_size or widen {where}.dataset_kwargs"]
        return []

    def _held_out(self, entries: Iterable[dict], size: int) -> List[Problem]:
        """The first ``size`` distinct prompts of ``entries`` that are not training prompts."""
        seen = {p.prompt for p in self._train}
        held_out: List[Problem] = []
        for entry in entries:
            problem = self._problem(len(held_out), entry)
            if problem.prompt not in seen:
                seen.add(problem.prompt)
                held_out.append(problem)
                if len(held_out) == size:
                    break
        return held_out

    def _problem(self, index: int, entry: dict) -> Problem:
        expression = entry.get("metadata", {}).get("expression")
        if self._style == "expression" and expression:
            prompt = f"{expression} ="
        else:
            prompt = entry["question"]
        return Problem(index=index, prompt=prompt, answer=str(entry["answer"]), meta={"entry": entry})

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        """The family's verifier on the answer text without the prompt it repeats, once that text states
        a value (``rlscale.tasks.stated``)."""
        text = without_prompt(answer_text, problem.prompt).strip()
        if stated_value(text, problem.answer) is None:
            return False
        return self._train_ds.score_answer(text, entry=problem.meta["entry"]) >= 1.0

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        expression = problem.meta["entry"].get("metadata", {}).get("expression")
        if not expression or not re.fullmatch(r"\s*-?\d+(\s*[-+]\s*\d+)*\s*", expression):
            return None
        tokens = re.findall(r"[-+]|\d+", expression)
        total = int(tokens[0])
        steps = []
        for op, num in zip(tokens[1::2], tokens[2::2]):
            new = total + int(num) if op == "+" else total - int(num)
            steps.append(f"{total}{op}{num}={new}")
            total = new
        return Demonstration(think=";".join(steps), answer=str(total))
