"""When a run's truncation rate (``truncation_rate`` of its train lines) signals instability, one rule for the
trainer's warning and the report's flag.

ScaleRL (Section 2 and the length-control study of Section 3.2) found truncation rates of 10-15 % a reliable
warning sign of unstable training, on batches of 768 completions with interruptions; ScaleRL keeps it under
5 %. Two things make a batch's rate alone the wrong test here: a small batch moves it in coarse steps (32
completions: 3 % per completion), and a small answer budget truncates a steady share by design (the
embedded default about 11 %) without any instability. So the rate is read as its mean over the last
WINDOW train steps, and the signal is a rise: that mean above ``level`` (``trainer.truncation_warn``, default
the paper's 10 %) after the run had brought it RISE (5 points) or more below the level, truncations growing
again over the run as generation lengths do before a collapse. A steady rate, however high (the default's
11 %), and a rate that starts high and falls (the untrained model rambling, then learning the budget, with
the bumps of a noisy decline) never signal; the report's diagnostics plot every rate.

Simulated steady rates (batches of 8 prompts x 8 completions, each prompt's rate drawn from a Beta of
concentration 3, 2,000 runs each): a steady 11 % signals in no run of 60 or 200 steps; a steady 8 % in 0.6 % of
runs of 60 steps and 11 % of 200 steps (with a mean over 10 steps: 23 % and 85 %).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Iterable, Optional

WINDOW = 20  # train steps the rate is averaged over
LEVEL = 0.10  # default trainer.truncation_warn: the paper's 10 %
RISE = 0.05  # how far below the level the mean must have been earlier in the run


@dataclass
class TruncationWatch:
    """The rule over a run's train steps in order: ``add`` each step's rate, ``reason`` says why the
    mean now signals instability ("" when it does not)."""

    level: float = LEVEL
    recent: Deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    lowest: Optional[float] = None
    reason: str = ""

    @property
    def mean(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 0.0

    def add(self, rate: float) -> str:
        self.recent.append(float(rate))
        if len(self.recent) < WINDOW:
            return ""
        mean = self.mean
        came_back = self.lowest is not None and self.lowest <= self.level - RISE
        self.reason = (f"mean of the last {WINDOW} steps {mean:.0%}, back above {self.level:.0%} from {self.lowest:.0%}"
                       if came_back and mean > self.level else "")
        self.lowest = mean if self.lowest is None else min(self.lowest, mean)
        return self.reason


def first_signal(rates: Iterable[float], level: float = LEVEL) -> Optional[int]:
    """The index of the first step whose mean signals instability, None when none does."""
    watch = TruncationWatch(level)
    for index, rate in enumerate(rates):
        if watch.add(rate):
            return index
    return None
