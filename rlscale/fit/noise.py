"""A sweep's eval precision: the reward of an eval is a mean over its samples, with a standard error the
trainer writes as ``<y>_se``. When the median SE of the sweep's fitted evals exceeds half the margin on A
(App. A.7's 0.02), eval noise alone can move A by about the margin, so the report flags the sweep and says
how many eval samples would bring the SE to half the margin (SE ~ 1/sqrt(samples))."""
from __future__ import annotations

import statistics
from typing import List, Optional

from rlscale.fit.schema import EvalNoise, RunFit

NOISE_FRACTION_OF_MARGIN = 0.5


def eval_noise(runs: List[RunFit], sweep: str, margin: float) -> Optional[EvalNoise]:
    """The eval precision of ``sweep``'s fitted runs; None when none reports its SE."""
    members = [r for r in runs if r.sweep == sweep and r.fitted]
    ses = [r.eval_se for r in members if r.eval_se is not None]
    if not ses:
        return None
    se, limit = statistics.median(ses), NOISE_FRACTION_OF_MARGIN * margin
    sizes = [r.eval_samples for r in members if r.eval_samples is not None]
    samples = statistics.median(sizes) if sizes else None
    needed = samples * (se / limit) ** 2 if samples is not None and limit > 0 else None
    return EvalNoise(sweep=sweep, median_se=se, limit=limit, eval_samples=samples, samples_needed=needed)
