"""Validation: mean pass rate over the fixed held-out split, ``samples`` completions per prompt
(Section 2: 1,000 held-out prompts x 16 samples, every 100 steps), and the first completion of the first
``logged`` prompts as samples to read (the run's samples.jsonl). Sampling uses its own RNG, seeded from
the run's seed alone: evaluating never shifts the training run's random stream, and every eval of a run
draws the same random numbers (common random numbers), so the change between two evals comes from the
policy rather than from fresh sampling noise (on the embedded default this took the R^2 of Eq. 1 from
0.84-0.96 to 0.96-0.97 over two runs each).

Precision: ``val_reward_se`` is the standard error of ``val_reward`` over distinct prompts (clustered by
prompt), sd(p_i) / sqrt(n) with p_i the pass rate of distinct prompt i over all its samples (a prompt that
appears twice in the split is one cluster) and sd the sample standard deviation (n - 1). It counts both the
spread of difficulty across the held-out prompts and the sampling noise of each p_i, i.e. how far the
reward on a fresh draw of n prompts would move (the paper's 1,000 prompts x 16 samples); more samples of
the same prompts cannot shrink it below the spread of difficulty. ``val_prompts`` is n, the number of
distinct prompts, in which rlscale.fit.noise states how many more would resolve a comparison.

A mixture's eval (``rlscale.tasks.mixture``) pools every part's held-out prompts in ``val_reward`` and gives
each part's own figures as ``val_reward/<part>`` (and ``val_reward_se/<part>``, ...), from the same samples.
A downstream set (``eval.downstream``, ``DownstreamEval``) is evaluated the same way on its own held-out prompts
and logged as ``val_reward/<name>``, ...; no completions of it are logged."""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Sequence

import torch

from rlscale.core.protocols import Generator, PolicyTokenizer
from rlscale.core.seeds import derived_seed
from rlscale.core.types import Completion
from rlscale.tasks.answer_format import FormattedTask
from rlscale.tasks.base import Problem
from rlscale.tasks.mixture import part_of
from rlscale.train.rollouts import score_completion

CHUNK_SEQUENCES = 512
EVAL_SEED_BASE = 7_919_000_000


@dataclass
class EvalResult:
    val_reward: float
    val_reward_se: float
    val_samples: int
    val_prompts: int
    truncation_rate: float
    samples: List[dict] = field(default_factory=list)
    parts: Dict[str, "EvalResult"] = field(default_factory=dict)  # a mixture's parts, each over its own prompts

    def metrics(self) -> Dict[str, float]:
        """The eval line's fields: pooled, then ``<field>/<part>`` for each part of a mixture."""
        own = {"val_reward": self.val_reward, "val_reward_se": self.val_reward_se, "val_samples": self.val_samples,
               "val_prompts": self.val_prompts, "val_truncation_rate": self.truncation_rate}
        for name, part in self.parts.items():
            own.update({f"{key}/{name}": value for key, value in part.metrics().items()})
        return own


def summarized(prompts: Sequence[str], correct: Sequence[bool], truncated: Sequence[bool]) -> EvalResult:
    """Pass rate, its standard error over distinct prompts, and the truncation rate of these samples."""
    n = max(1, len(correct))
    per_prompt = distinct_pass_rates(prompts, correct)
    return EvalResult(val_reward=sum(correct) / n, val_reward_se=pass_rate_se(per_prompt), val_samples=len(correct),
                      val_prompts=len(per_prompt), truncation_rate=sum(truncated) / n)


@dataclass(frozen=True)
class DownstreamEval:
    """A downstream set of the run (``eval.downstream``), built: its name, samples per prompt and task."""

    name: str
    samples: int
    task: FormattedTask

    @property
    def stream(self) -> int:
        """Its eval stream: a number of its own, the same on every machine (CRC-32 of its name), so its samples
        are common random numbers from eval to eval and differ from the run's own eval's."""
        return zlib.crc32(self.name.encode())

    def evaluate(self, tok: PolicyTokenizer, generator: Generator, seed: int, step: int) -> Dict[str, float]:
        """Its eval line fields: ``<field>/<name>`` for each of ``EvalResult.metrics()``."""
        result = evaluate(self.task, tok, generator, self.task.val_problems(), self.samples, seed, step,
                          stream=self.stream)
        return {f"{key}/{self.name}": value for key, value in result.metrics().items()}


def pass_rate_se(per_prompt: Sequence[float]) -> float:
    """Standard error of the mean of per-prompt pass rates: sd (n - 1 denominator) / sqrt(n); NaN for n < 2."""
    n = len(per_prompt)
    if n < 2:
        return math.nan
    mean = sum(per_prompt) / n
    return math.sqrt(sum((p - mean) ** 2 for p in per_prompt) / (n - 1) / n)


def sample_record(task: FormattedTask, problem: Problem, completion: Completion, correct: bool, step: int) -> dict:
    """One line of samples.jsonl: the prompt as the task states it, the completion with its think trace,
    the extracted answer (None when there is none), the reference, the verdict and its +1/-1 reward."""
    return {"step": step, "policy_version": max(completion.versions, default=step), "problem": problem.index,
            "prompt": problem.prompt, "completion": completion.text, "thinks": completion.thinks,
            "answer": None if completion.truncated else task.extract(problem, completion.answer),
            "reference": problem.answer, "correct": correct, "reward": 1.0 if correct else -1.0,
            "tokens": len(completion.tokens), "truncated": completion.truncated,
            "interrupted": completion.interrupted}


def evaluate(task: FormattedTask, tok: PolicyTokenizer, generator: Generator, problems: List[Problem], samples: int,
             seed: int, step: int, logged: int = 0, stream: int = 0) -> EvalResult:
    """``samples`` completions of each of ``problems``, scored; the first of each of the first ``logged`` prompts
    kept as records. The sampling RNG depends only on the run's ``seed`` and the eval ``stream`` (0: the run's own
    held-out split; a downstream set's own number)."""
    rng = torch.Generator().manual_seed(derived_seed(EVAL_SEED_BASE, seed, stream))
    flat = [p for p in problems for _ in range(samples)]
    correct: List[bool] = []
    truncated: List[bool] = []
    records = []
    for start in range(0, len(flat), CHUNK_SEQUENCES):
        chunk = flat[start:start + CHUNK_SEQUENCES]
        completions = generator.generate([tok.encode_prompt(p.prompt) for p in chunk], rng, version=step)
        verdicts = [score_completion(task, p, c) for p, c in zip(chunk, completions)]
        correct += verdicts
        truncated += [c.truncated for c in completions]
        for i, (p, c, ok) in enumerate(zip(chunk, completions, verdicts), start):
            if i % samples == 0 and i // samples < logged:  # the first sample of each of the first prompts
                records.append(sample_record(task, p, c, ok, step))
    result = summarized([p.prompt for p in flat], correct, truncated)
    result.samples = records
    for name in dict.fromkeys(part_of(p) for p in flat if part_of(p) is not None):
        mine = [i for i, p in enumerate(flat) if part_of(p) == name]
        result.parts[name] = summarized([flat[i].prompt for i in mine], [correct[i] for i in mine],
                                        [truncated[i] for i in mine])
    return result


def distinct_pass_rates(prompts: Sequence[str], correct: Sequence[bool]) -> List[float]:
    """The pass rate of each distinct prompt over all its samples, in order of first appearance."""
    totals: dict = {}
    for prompt, ok in zip(prompts, correct):
        hits, count = totals.get(prompt, (0, 0))
        totals[prompt] = (hits + ok, count + 1)
    return [hits / count for hits, count in totals.values()]
