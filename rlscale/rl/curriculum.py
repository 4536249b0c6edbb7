"""The curriculum over the training pool (ScaleRL Section 3.2).

No-Positive-Resampling (NPR): each prompt's history of pass rates is kept; a prompt whose recent pass rate (its
latest epoch's, by default) reaches the threshold (paper: 0.9) is absent from every later epoch ("adaptive prompt
filtering"). ``NoPositiveResamplingPool`` with ``enabled=False`` is the baseline's uniform resampling.
``CURRICULA`` builds the pool of each ``curriculum.name``, whose ``cfg`` annotation names the option's config class
(``NoPositiveResamplingConfig``, or ``CurriculumConfig`` for uniform): the run's ``curriculum`` section is typed by
it when the config is composed (``rlscale.config.compose``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Sequence

import torch
from torch import Tensor

from rlscale.knobs import knob

CURRICULUM_NAME = "the curriculum (``curriculum=NAME``)"


@dataclass
class CurriculumConfig:
    """What every curriculum has: its name and the RL pool it draws from."""

    name: str = knob("uniform", CURRICULUM_NAME, "Sec. 3.2")
    pool_size: int = knob(128, "the RL pool is the first ``pool_size`` training prompts (0, or more than the split "
                          "holds: the whole split; the tiny model's warm-up still sees the whole split). A pool that "
                          "the run goes through several times lets the curriculum act, as over the paper's epochs",
                          ge=0)


@dataclass
class NoPositiveResamplingConfig(CurriculumConfig):
    """When a prompt leaves the pool for good (ScaleRL, Sec. 3.2)."""

    name: str = knob("no_positive_resampling", CURRICULUM_NAME, "Sec. 3.2")
    threshold: float = knob(0.9, "a prompt whose recent pass rate (over its last ``window`` visits) reaches this is "
                            "removed for good: the epoch under way keeps its order, every later epoch leaves the "
                            "prompt out", "Sec. 3.2", gt=0, le=1)
    window: int = knob(1, "the visits (G samples each; an epoch visits every active prompt once) whose samples give "
                       "the recent pass rate; 1: the prompt's latest epoch", "Sec. 3.2", gt=0)


class PoolExhausted(RuntimeError):
    """No-Positive-Resampling has removed every prompt of the training set."""


@dataclass
class PromptHistory:
    """One prompt's record: (correct, samples) of each of its last ``window`` visits, oldest first, and
    whether No-Positive-Resampling has removed it."""

    visits: list[tuple[float, int]] = field(default_factory=list)
    removed: bool = False

    def add_visit(self, correct: float, samples: int, window: int) -> None:
        self.visits = [*self.visits, (correct, samples)][-window:]

    def pass_rate(self) -> float:
        """Correct samples over all samples of the kept visits (0.0 before the first visit)."""
        return sum(c for c, _ in self.visits) / max(sum(n for _, n in self.visits), 1)


class NoPositiveResamplingPool:
    """The training prompts 0..num_prompts-1, served in epochs, with No-Positive-Resampling (Sec. 3.2).

    Each epoch shuffles the prompts still active with the caller's ``torch.Generator`` and walks
    through that order, so an epoch visits every active prompt once; a batch may run across an epoch
    boundary (so with fewer than n active prompts a batch repeats some). ``update`` records one visit
    per prompt: the correctness of its G samples.

    Removal rule. ScaleRL (Sec. 3.2, "No-Positive-Resampling") keeps a history of pass rates and
    permanently removes prompts with pass rate >= 0.9 from subsequent epochs. The pass rate that decides
    is the prompt's recent one: correct samples over all samples of its last ``window`` visits, judged
    once it has that many. With the default ``window=1`` that is its latest visit, i.e. its pass rate in
    the latest epoch: what the current policy does on it. A larger window pools several epochs' samples,
    so a removal needs more evidence when G is small. A mean over every sample since step 0 would hold a
    prompt that started at 0/8 and is now solved 8/8 below the threshold for as long as its early failures
    weigh in (0.5 after two visits), so the hard prompts the policy has learned would never leave.

    Timing. A prompt is marked removed by the ``update`` that brings its recent pass rate to
    ``threshold`` and stays removed whatever follows. The order of an epoch is fixed when the epoch
    starts: a prompt removed after that is still served where that order has it, and is absent from
    every epoch that starts afterwards ("from subsequent epochs"). With ``enabled=False`` (uniform
    resampling) nothing is ever removed; the history is still kept. When no prompt is left, the next
    epoch raises ``PoolExhausted``.

    ``state_dict`` holds plain Python types (per-prompt visits, removal flags, the epoch's order and
    position). Resuming from it together with the generator's state (``generator.get_state()``)
    yields exactly the batches an uninterrupted run would have.
    """

    def __init__(self, num_prompts: int, threshold: float = 0.9, enabled: bool = True, window: int = 1) -> None:
        if num_prompts < 1:
            raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if window < 1:
            raise ValueError(f"window must be >= 1 visit, got {window}")
        self.num_prompts = num_prompts
        self.threshold = threshold
        self.enabled = enabled
        self.window = window
        self._prompts = [PromptHistory() for _ in range(num_prompts)]
        self._order: list[int] = []
        self._position = 0
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """Number of epochs started so far (1 during the first)."""
        return self._epoch

    def update(self, prompt_ids: Sequence[int], correct: Tensor) -> None:
        """Record one visit per prompt: ``prompt_ids`` [P], ``correct`` [P, G] float in {0, 1}
        (1 = correct), row i the G samples of prompt ``prompt_ids[i]``, rows in the order drawn."""
        ids = list(prompt_ids)
        if correct.dim() != 2 or correct.shape[0] != len(ids) or correct.shape[1] < 1:
            raise ValueError(f"correct {tuple(correct.shape)} must be [P, G] with P = {len(ids)} prompt ids, G >= 1")
        if bool(((correct < 0) | (correct > 1)).any()):
            raise ValueError("correct must be in {0, 1} (map +1/-1 rewards to 1/0 first)")
        if any(not 0 <= p < self.num_prompts for p in ids):
            raise ValueError(f"prompt ids must be in [0, {self.num_prompts})")
        for prompt, successes in zip(ids, correct.sum(dim=1).tolist()):
            history = self._prompts[prompt]
            history.add_visit(successes, correct.shape[1], self.window)
            if self.enabled and len(history.visits) == self.window and history.pass_rate() >= self.threshold:
                history.removed = True

    def pass_rate(self, prompt_id: int) -> float:
        """Recent pass rate of one prompt: over its last ``window`` visits (0.0 before any)."""
        return self._prompts[prompt_id].pass_rate()

    def active(self) -> list[int]:
        """The prompts not removed (those the next epoch will hold), ascending."""
        return [p for p, history in enumerate(self._prompts) if not history.removed]

    def next_batch(self, n: int, generator: torch.Generator) -> list[int]:
        """The next ``n`` prompt ids; raises ``PoolExhausted`` when an epoch must start and no prompt is
        left."""
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")
        batch: list[int] = []
        while len(batch) < n:
            if self._position == len(self._order):
                self._start_epoch(generator)
            batch.append(self._order[self._position])
            self._position += 1
        return batch

    def _start_epoch(self, generator: torch.Generator) -> None:
        active = self.active()
        if not active:
            raise PoolExhausted(f"No-Positive-Resampling removed all {self.num_prompts} prompts (recent pass "
                                f"rate >= {self.threshold}); the training set is solved")
        self._order = [active[i] for i in torch.randperm(len(active), generator=generator).tolist()]
        self._position = 0
        self._epoch += 1

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (lists, ints, floats, bools) for ``torch.save``."""
        return {"num_prompts": self.num_prompts, "window": self.window,
                "visits": [[[c, n] for c, n in history.visits] for history in self._prompts],
                "removed": [history.removed for history in self._prompts],
                "order": list(self._order), "position": self._position, "epoch": self._epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s output. Raises ``ValueError`` (one line) for a state of another
        pool size or window, or one without per-visit history (cumulative counts cannot give the
        recent pass rate)."""
        if "visits" not in state:
            raise ValueError("the No-Positive-Resampling state holds cumulative pass rates, not per-visit ones; "
                             "it cannot be resumed under the recent-pass-rate rule: start over with --force")
        for key, mine in (("num_prompts", self.num_prompts), ("window", self.window)):
            if state[key] != mine:
                raise ValueError(f"the No-Positive-Resampling state has {key} {state[key]}, this run {mine}")
        self._prompts = [PromptHistory([(float(c), int(n)) for c, n in visits], bool(removed))
                         for visits, removed in zip(state["visits"], state["removed"])]
        self._order = list(state["order"])
        self._position = int(state["position"])
        self._epoch = int(state["epoch"])


def no_positive_resampling(num_prompts: int, cfg: NoPositiveResamplingConfig) -> NoPositiveResamplingPool:
    """prompts whose pass rate reaches the threshold leave the pool for good (ScaleRL, Sec. 3.2)"""
    return NoPositiveResamplingPool(num_prompts, cfg.threshold, enabled=True, window=cfg.window)


def uniform(num_prompts: int, cfg: CurriculumConfig) -> NoPositiveResamplingPool:
    """uniform resampling of the whole pool (Section-2 baseline)"""
    return NoPositiveResamplingPool(num_prompts, enabled=False)


CURRICULA: Dict[str, Callable[[int, Any], NoPositiveResamplingPool]] = {
    "no_positive_resampling": no_positive_resampling, "uniform": uniform}
"""The pool of each curriculum, over the first ``num_prompts`` training prompts."""
