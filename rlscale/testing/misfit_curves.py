"""Synthetic runs whose truth is not Eq. 1, for the misfit test (rlscale.fit.misfit) and its benchmark
(bench/misfit_bench.py): a power law that keeps rising through the run (App. A.4's form, the curve the
sigmoid cannot bend to), and a sigmoid with a step change part-way (a curriculum switch). Evals are drawn as
rlscale.testing.curves draws them (EvalDraw: drift, binomial or clustered prompts), through its
``drawn_truth``; ``truth_run`` draws a run of any truth, Eq. 1's included.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from rlscale.fit.curves import Curve
from rlscale.fit.forms import sigmoid
from rlscale.testing.curves import R0, CurveSpec, EvalDraw, drawn_curve, drawn_truth, eval_x


@dataclass(frozen=True)
class PowerLawSpec:
    """A power-law truth R = A - (A - R0) (1 + C / c0)^-B: R0 at C = 0, App. A.4's A - D / C^B (D = (A - R0)
    c0^B) once C >> c0. The default rises from 0.30 to 0.55 at 1.6k GPU-hours and 0.76 at 16k, still
    climbing: no sigmoid of A <= 1 bends like it."""

    A: float = 1.0
    B: float = 0.3
    c0: float = 500.0

    def reward(self, x: np.ndarray, r0: float = R0) -> np.ndarray:
        return self.A - (self.A - r0) * (1.0 + np.asarray(x, dtype=float) / self.c0) ** -self.B


@dataclass(frozen=True)
class StepSpec:
    """A sigmoid truth (``curve``) whose reward steps up by ``step`` from ``at`` (a fraction of the run's
    compute) on: a curriculum switch at 70 % of the run by default."""

    curve: CurveSpec
    step: float = 0.07
    at: float = 0.7

    def change_x(self, draw: EvalDraw) -> float:
        """The compute of the step: ``at`` of the draw's last eval."""
        return self.at * float(eval_x(draw)[-1])

    def reward(self, x: np.ndarray, draw: EvalDraw, r0: float = R0) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return sigmoid(x, r0, self.curve.A, self.curve.B, self.curve.C_mid) + self.step * (x >= self.change_x(draw))


def power_law_run(spec: PowerLawSpec, draw: EvalDraw, rng: np.random.Generator, r0: float = R0,
                  offsets: Optional[np.ndarray] = None, variant: str = "power", seed: Optional[int] = 0) -> Curve:
    """One run whose true reward is ``spec``'s power law, evals drawn by ``draw``."""
    x = eval_x(draw)
    return drawn_truth(x, spec.reward(x, r0), draw, rng, offsets=offsets, variant=variant, seed=seed)


def step_run(spec: StepSpec, draw: EvalDraw, rng: np.random.Generator, r0: float = R0,
             offsets: Optional[np.ndarray] = None, variant: str = "step", seed: Optional[int] = 0) -> Curve:
    """One run whose true reward is ``spec``'s sigmoid with its step, evals drawn by ``draw``."""
    x = eval_x(draw)
    return drawn_truth(x, spec.reward(x, draw, r0), draw, rng, offsets=offsets, variant=variant, seed=seed)


Truth = Union[CurveSpec, PowerLawSpec, StepSpec]


def truth_run(truth: Truth, draw: EvalDraw, rng: np.random.Generator, r0: float = R0) -> Curve:
    """One run of any of the truths here or Eq. 1's (rlscale.testing.curves.drawn_curve), evals drawn by
    ``draw``."""
    if isinstance(truth, PowerLawSpec):
        return power_law_run(truth, draw, rng, r0)
    if isinstance(truth, StepSpec):
        return step_run(truth, draw, rng, r0)
    return drawn_curve(truth, draw, rng, r0)
