"""Join the fits of further metrics (rlscale.fit.by_metric) to the report's runs: the parallel-curves view of
each sweep (rlscale.report.parallel)."""
from __future__ import annotations

from typing import List, Optional, Tuple

from rlscale.fit.results import FitResults, RunFit
from rlscale.report.content import ReportData
from rlscale.report.parallel import ParallelRun, ParallelSweep, paired


def _key(fit: RunFit) -> Tuple[str, str, Optional[int], str]:
    return fit.sweep, fit.variant, fit.seed, fit.run_path


def attach_parallel(report: ReportData, further: List[FitResults]) -> None:
    """Set ``report.parallel``: per sweep, its runs' fits of the first metric (the report's) and of each
    ``further`` one, joined by run; nothing when there is no further metric."""
    if not further:
        return
    metrics = [report.settings.y, *(f.settings.y for f in further)]
    by_metric = [{_key(fit): fit for fit in f.runs} for f in further]
    views = {}
    for sweep in report.sweeps:
        runs = []
        for run in sweep.runs:
            if run.fit is None:
                continue
            fits = {metrics[0]: run.fit}
            tracking = {}
            for metric, table in zip(metrics[1:], by_metric):
                other = table.get(_key(run.fit))
                fits[metric] = other
                tracking[metric] = paired(run.fit, other) if other is not None else None
            runs.append(ParallelRun(run.name, run.anchor, fits, tracking))
        if runs:
            views[sweep.name] = ParallelSweep(metrics, runs)
    report.parallel = views
