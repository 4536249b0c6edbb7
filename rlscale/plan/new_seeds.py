"""What later runs of a planned variant will show at the budget: a prediction interval for the mean of their
observed rewards (each run's reward read off its EVALS evals around the budget, rlscale.plan.observed), the
check a plan owes (a prediction is checked against data it was not fitted on; Section 5 fits at half the
target budget and reads the curve at the whole of it).

The plan's prediction P is the seed mean of N seen seeds' Eq. 1 at C (rlscale.fit.predict); ``sd`` is the
seed spread of those predictions (pooled over the sweep and raised to the variant's own, with its degrees of
freedom ``df``), ``v_i`` the eval variance of run i's observed value (its eval SE squared over the evals it
averages). For the mean O of n later runs, ``new`` of them seeds the plan did not see and ``extended`` of
them seen seeds run past the budget (their seed offset is already in P; their evals there are not):

    var(O - P) = sd^2 max(a, 1/N) + sum(v_i) / n^2,
    a = new / n^2 + extended (1/n - 1/N)^2 + (N - extended) / N^2,

the bound over how ``sd^2`` splits into run-to-run spread and each fit's own error (both unknown: either can
make all of it). For new seeds only this is sd^2 / n (the spread of new runs) + sd^2 / N (the uncertainty of
P from the seeds seen) + the eval noise; for the seen seeds all extended, sd^2 / N + the eval noise. The
interval is P +- t(level, df) sqrt(var). It is not the interval of the seeds seen (that one is sd / sqrt(N)
alone, rlscale.fit.predict): later runs scatter by their own seed and eval noise.

No interval (``reason``): one seed seen and no spread of other variants to pool (a new seed's spread is
unknown), or no eval noise to go on (the runs write no ``<y>_se`` and their fits measured no residuals).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from scipy.stats import t as student_t

from rlscale.fit.differences import Pooled
from rlscale.fit.predict import VariantPrediction
from rlscale.fit.one_run import EXTRAP_EVALS

EVALS = EXTRAP_EVALS  # evals averaged into a run's observed reward at the budget (as the extrapolation check)
NO_SPREAD = "one seed seen and no seed spread to pool: the spread of new seeds is unknown"
NO_EVAL_NOISE = "no eval noise: the runs write no eval SE and their fits measured no residuals"


@dataclass(frozen=True)
class NewSeeds:
    """The plan's prediction for the mean of ``k`` new seeds at the budget, each observed as the mean of
    ``evals`` evals around it: ``mean`` (the variant's predicted reward) and the prediction interval
    [lo, hi] (None, with ``reason``, when there is none), from the seed spread ``sd`` (``df`` degrees of
    freedom), the per-eval ``eval_se`` and the ``seen`` seeds (module docstring)."""

    k: int
    evals: int
    mean: float
    lo: Optional[float]
    hi: Optional[float]
    seen: int
    sd: Optional[float]
    df: Optional[int]
    eval_se: Optional[float]
    reason: str = ""


def run_eval_se(prediction: VariantPrediction) -> Optional[float]:
    """The per-eval SE of a variant's runs: their median ``<y>_se`` (RunFit.eval_se), else the median white
    residual sd of their fits (RunFit.noise_white_sd), else None."""
    for values in ([r.eval_se for r in prediction.runs], [r.noise_white_sd for r in prediction.runs]):
        known = [v for v in values if v is not None and math.isfinite(v) and v > 0]
        if known:
            return float(statistics.median(known))
    return None


def new_seeds(prediction: VariantPrediction, spread: Optional[Pooled], k: int, level: float) -> NewSeeds:
    """The prediction interval of the mean of ``k`` new seeds of ``prediction``'s variant, ``spread`` its
    seed spread (rlscale.fit.predict.variant_spread)."""
    seen = len(prediction.samples.seeds)
    eval_se = run_eval_se(prediction)
    reason = NO_SPREAD if spread is None else NO_EVAL_NOISE if eval_se is None else ""
    lo = hi = None
    if not reason:
        lo, hi = mean_interval(prediction.value, spread.sd, spread.df, seen, k, 0, k * eval_se ** 2 / EVALS, level)
    return NewSeeds(k=k, evals=EVALS, mean=prediction.value, lo=lo, hi=hi, seen=seen,
                    sd=None if spread is None else spread.sd, df=None if spread is None else spread.df,
                    eval_se=eval_se, reason=reason)


def mean_interval(mean: float, sd: float, df: int, seen: int, new: int, extended: int, eval_variance: float,
                  level: float) -> Tuple[float, float]:
    """The prediction interval at ``level`` of the mean of ``new`` + ``extended`` later runs around the
    plan's ``mean`` of ``seen`` seeds; ``eval_variance`` is the sum of the runs' eval variances (module
    docstring)."""
    n = new + extended
    a = new / n ** 2 + extended * (1 / n - 1 / seen) ** 2 + (seen - extended) / seen ** 2
    half = student_t.ppf((1 + level) / 2, df) * math.sqrt(sd ** 2 * max(a, 1 / seen) + eval_variance / n ** 2)
    return mean - half, mean + half


def eval_variances(factors: Sequence[float], variances: Sequence[Optional[float]], eval_se: float) -> float:
    """The sum of later runs' eval variances: each run's leverage ``factor`` (rlscale.plan.observed) times
    its own mean squared eval SE, or the plan's ``eval_se`` squared when it writes none."""
    return sum(f * (eval_se ** 2 if v is None else v) for f, v in zip(factors, variances))
