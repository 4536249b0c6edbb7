"""The residual variance of a short fit, pooled over its variant's seeds (App. A.7's noise, measured where one
run has too few points to measure it).

A run fitted on a handful of evals (an early window of ``--fit-until``, or a short run) leaves n - 3
residual degrees of freedom; with three, the residual variance is a chi-square draw of three degrees
scaled by the truth, and one run in twenty comes out below a fifth of it. A's profile interval then closes
around whatever the points happen to show: on SmolLM2 runs fitted on their first quarter (six evals at the
foot of a rise to about 0.44), draws with residual sds of 0.0009-0.0017 against eval SEs of 0.005-0.006
called A 0.05-0.07 with intervals that stopped below 0.1.

The seeds of one variant share a task, an eval set, a config and a trainer, so the share of an eval's
variance that shows as residual scatter is alike across them (the rest is the eval set's offset, which no
residual shows, rlscale.fit.correlated). Pooled over the variant's fitted runs it has their summed degrees
of freedom:

    ratio = sum(SSE) / sum((n - 3) eval_se^2),

and a run with fewer than MIN_DEGREES residual directions has its residual variance raised to at least
ratio x its own eval_se^2 (rlscale.fit.one_run). A run with a variance above that keeps its own; a variant of
one seed, or whose runs report no eval SE, has no floor. Variants are not pooled with each other: a sweep
may mix tasks, and a learning rate that makes a run wander leaves residuals of misfit, not of noise (pooled
over a whole sweep of five tasks at two learning rates, the level raised a saturated run's interval from
+-0.007 to past twice its rise).
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

from rlscale.fit.correlated import MIN_DEGREES
from rlscale.fit.forms import N_PARAMS
from rlscale.fit.results import RunFit


def residual_dof(run: RunFit) -> int:
    """The residual degrees of freedom of a fitted run."""
    return (run.n_points or 0) - N_PARAMS


def pool_key(run: RunFit) -> Tuple[str, str]:
    """The runs pooled together: one variant of one sweep."""
    return run.sweep, run.variant


def pooled_ratios(runs: Iterable[RunFit]) -> Dict[Tuple[str, str], float]:
    """pool_key -> the pooled ratio of residual variance to squared eval SE (module docstring), over the
    variant's fitted runs with at least one residual degree of freedom and an eval SE."""
    sums: Dict[Tuple[str, str], list] = {}
    for run in runs:
        if run.fitted and run.sse is not None and run.eval_se and residual_dof(run) > 0:
            total = sums.setdefault(pool_key(run), [0.0, 0.0])
            total[0] += run.sse
            total[1] += residual_dof(run) * run.eval_se ** 2
    return {key: sse / scale for key, (sse, scale) in sums.items() if scale > 0}


def below_pooled(run: RunFit, ratio: float) -> bool:
    """Whether ``run`` has too few residual directions for its own noise estimate and a residual variance
    below its variant's pooled level: it is refitted with that level as its floor."""
    dof = residual_dof(run)
    return (run.fitted and run.sse is not None and bool(run.eval_se) and 0 < dof < MIN_DEGREES
            and run.sse / dof < ratio * run.eval_se ** 2)
