"""A sweep's eval precision and its share of the run-to-run spread of A (App. A.7's margin, Section 4).

Two things move a run's fitted A away from its variant's: what its own points carry (the sampling noise
of each eval and the drift of the reward between evals, which a run's profile interval of A measures,
rlscale.fit.one_run) and what differs between runs beyond that (the seed's luck in prompts, samples and
updates). The run-to-run spread of A (the within-variant seed sd pooled over the sweep, rlscale.fit.pairing)
holds both; the share of the first is the median squared within-run standard error of the runs' A over the
spread's variance (at most 1). Verdicts name the larger share first. Pairing by seed narrows the interval
of a difference but does not say which source it cancelled (common random numbers cancel part of both),
so the share is taken against the unpaired spread.

The eval reward is a mean over prompts, and its standard error (``<y>_se``, written by the trainer over
distinct prompts) falls as 1 / sqrt(distinct prompts), not as 1 / sqrt(samples): more samples of the same
prompts leave the spread of difficulty between prompts as it was. So the cure is stated in distinct
prompts (``val_prompts``): the eval-noise share shrinks in proportion to 1 / prompts.

A run's own variance of A has two parts (rlscale.fit.correlated): the eval's sampling, white noise of variance
w at each eval, and the reward's drift between evals (an AR(1) the residuals show). Only the first shrinks with
more eval prompts: its share of A's variance is w / (s^2 x inflation), s^2 the residual variance per degree of
freedom and the inflation A's variance over the independent-noise formula's (``sampling``). A drift that more
prompts leave as it was is the policy's own reward wandering between updates (on SmolLM2-135M, sums of 0-99:
the white sd halved from 0.0147 to 0.0074 when the eval went from 1,000 to 4,500 distinct prompts, the drift's
stayed at 0.025-0.026 with correlation 0.98, and A's standard error did not fall: docs/examples/
smollm2-sums-loo-size/); more seeds average it out.

A run's own standard error of A is taken from identified runs only: an interval cut off at the edge of A's
range (an open one) is a width of the range, not of the run's noise.

The sweep is flagged when the median run's A has a standard error above half the margin: its own eval noise
then moves A by about the margin.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional

from rlscale.fit.differences import Pooled
from rlscale.fit.forms import N_PARAMS
from rlscale.fit.pairing import SeedTable, variance_share
from rlscale.fit.results import EvalNoise, RunFit

NOISE_FRACTION_OF_MARGIN = 0.5


def comparable(run: RunFit) -> bool:
    """A fitted run whose A is identified, or bounded but for its interval's edge (rlscale.fit.one_run), as the
    comparisons take it."""
    return run.fitted and (run.A_identified is not False or bool(run.A_interval_open))


def a_spread(runs: List[RunFit], pairing: bool) -> Optional[Pooled]:
    """The run-to-run spread of A over the identified runs of ``runs``: the within-variant seed sd, seed
    effects included (the paired spread where no variant has two seeds)."""
    values: Dict[str, Dict] = {}
    for i, r in enumerate(runs):
        if comparable(r) and r.A is not None:
            values.setdefault(r.variant, {})[r.seed if r.seed is not None else (r.variant, i)] = r.A
    table = SeedTable.of(values, pairing)
    return table.unpaired if table.unpaired is not None else table.paired


def eval_noise(runs: List[RunFit], sweep: str, margin: float, pairing: bool = True) -> Optional[EvalNoise]:
    """The eval precision of ``sweep``'s fitted runs; None when none has an interval on A."""
    members = [r for r in runs if r.sweep == sweep and r.fitted]
    a_ses = [r.A_se_within for r in members if r.A_se_within is not None and r.A_identified]
    if not a_ses:
        return None
    ses = [r.eval_se for r in members if r.eval_se is not None]
    prompts = [r.eval_prompts for r in members if r.eval_prompts is not None]
    sampled = [f for r in members if r.A_identified and (f := sampling_share(r)) is not None]
    return EvalNoise(sweep=sweep, median_se=statistics.median(ses) if ses else None,
                     a_se=statistics.median(a_ses), limit=NOISE_FRACTION_OF_MARGIN * margin,
                     eval_prompts=statistics.median(prompts) if prompts else None,
                     share=variance_share(a_ses, a_spread(members, pairing)),
                     sampling=statistics.median(sampled) if sampled else None)


def sampling_share(run: RunFit) -> Optional[float]:
    """The share of a run's own variance of A that its evals' sampling makes (module docstring), None when the
    fit recorded no residual covariance."""
    if None in (run.noise_white_sd, run.A_inflation, run.sse, run.n_points) or run.n_points <= N_PARAMS:
        return None
    s2 = run.sse / (run.n_points - N_PARAMS)
    if s2 <= 0:
        return None
    return min(1.0, run.noise_white_sd ** 2 / (s2 * max(run.A_inflation, 1.0)))
