"""Any reasoning-gym task by name (offline procedural tasks with verifiers), with a fixed held-out split.

``task.dataset`` names the family (any task reasoning-gym registers: ``chain_sum``, ``basic_arithmetic``,
``gsm_symbolic``, ``products``, ...) and ``task.dataset_kwargs`` the arguments of its generator, each
checked against the family's config before anything is generated. Only chain_sum has defaults of
rlscale's own (``DEFAULT_KWARGS``: 2-4 one-digit terms, a difficulty mix, so the embedded default's curve
saturates well below 1), which ``task.dataset_kwargs`` override key by key; every other family starts
from reasoning-gym's defaults.

The held-out split is ``task.val_size`` distinct prompts, none of them a training prompt, drawn with
another seed; a family whose space cannot give that many refuses. For the tasks whose entries carry an
arithmetic ``expression`` the task also gives worked demonstrations (running partial sums) for the
supervised warm-up of the tiny model. An answer that states no value (``rlscale.tasks.stated``:
"3 + 4 + 5", "8 or 9") is incorrect whatever the family's verifier says.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional

from omegaconf import DictConfig, OmegaConf

from rlscale.config.schema import TaskConfig
from rlscale.tasks.base import Demonstration, Problem
from rlscale.tasks.stated import stated_value, without_prompt

DEFAULT_KWARGS: Dict[str, Dict[str, Any]] = {
    "chain_sum": {"min_terms": 2, "max_terms": 4, "min_digits": 1, "max_digits": 1},
}
SET_BY_RLSCALE = {"seed": "task.seed", "size": "task.train_size and task.val_size"}
VAL_SEED_OFFSET = 1_000_003
VAL_DRAWS_PER_PROMPT = 10  # draws of the validation seed per held-out prompt asked for, at most


def family_arguments(dataset: str) -> List[str]:
    """The generator arguments of reasoning-gym's ``dataset`` that a task config may set, in the order of
    its config; ValueError with one line when reasoning-gym has no such task."""
    import reasoning_gym  # noqa: F401  (registers the tasks)
    from reasoning_gym.factory import DATASETS

    if dataset not in DATASETS:
        close = difflib.get_close_matches(dataset, DATASETS, n=3) or sorted(DATASETS)[:3]
        raise ValueError(f"task.dataset '{dataset}': not a reasoning-gym task (e.g. {', '.join(close)})")
    return [f.name for f in dataclasses.fields(DATASETS[dataset][1]) if f.name not in SET_BY_RLSCALE]


def generator_kwargs(dataset: str, dataset_kwargs: Mapping) -> Dict[str, Any]:
    """``dataset``'s generator arguments: rlscale's defaults for it (``DEFAULT_KWARGS``) under
    ``dataset_kwargs``; a key the family does not take fails with one line naming
    ``task.dataset_kwargs.<key>``."""
    accepted = family_arguments(dataset)
    given = OmegaConf.to_container(dataset_kwargs) if isinstance(dataset_kwargs, DictConfig) else dict(dataset_kwargs)
    for key in given:
        if key in SET_BY_RLSCALE:
            raise ValueError(f"task.dataset_kwargs.{key}: set by {SET_BY_RLSCALE[key]}")
        if key not in accepted:
            raise ValueError(f"task.dataset_kwargs.{key}: not an argument of reasoning-gym's {dataset} "
                             f"(it takes {', '.join(accepted) or 'none'})")
    return {**DEFAULT_KWARGS.get(dataset, {}), **given}


@contextmanager
def _named_errors(dataset: str, kwargs: Mapping[str, Any]) -> Iterator[None]:
    """A generator's refusal of an argument's value as one line naming the arguments its message names."""
    try:
        yield
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        named = [key for key in kwargs if re.search(rf"\b{re.escape(key)}\b", str(err))]
        named = named or (list(kwargs) if len(kwargs) == 1 else [])
        where = ", ".join(f"task.dataset_kwargs.{key}={kwargs[key]!r}" for key in named)
        why = " ".join(str(err).split()) or "rejected by the generator"
        raise ValueError(f"{where or f'task.dataset {dataset!r} with task.dataset_kwargs {kwargs}'}: {why}") from None


class ReasoningGymTask:
    """Train and validation problems from ``reasoning_gym.create_dataset(cfg.dataset, ...)``; the
    validation split is ``cfg.val_size`` distinct prompts drawn with a different seed, none of them a
    training prompt, so it is held out by construction."""

    name: str  # reasoning_gym/<task.dataset>

    def __init__(self, cfg: TaskConfig):
        import reasoning_gym

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
