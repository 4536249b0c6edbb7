"""The public API of ``rlscale.fit`` (used by ``rlscale fit`` and by ``rlscale report`` when fits are missing
or stale): fit every run of a results folder or tidy file, compare the variants, write the files.

``--x auto`` is resolved here (rlscale.fit.curves.resolve_x) and stored resolved in the settings.
Per run: Eq. 1 fitted after the cutoff (App. A.5-A.6), bootstrap intervals, extrapolation check and the
App. A.4 power law (rlscale.fit.one_run); the runs too short to measure their own noise whose residuals fall
below their variant's pooled level are fitted again at that level (rlscale.fit.pooled); then seed spread,
ranking and LOO table (rlscale.fit.compare).
A run that cannot be fitted gets a status and a one-line message; only an unreadable source, or an
``--x``/``--y`` that no eval line holds (``MetricError``, a ``SourceError``), raises.

The fits and comparisons run with one BLAS thread per process (threadpoolctl): their matrices are at most a
few hundred evals wide, where BLAS threads only wait on each other, and on a loaded machine that waiting made
the fit 2-5x slower; ``jobs`` processes are the fit's parallelism. ``jobs`` 0 is one process per CPU, with at
least RUNS_PER_PROCESS runs each (a worker process spends about a second importing, the fit of a hundred runs
with their bootstrap). The outputs do not depend on ``jobs``.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from itertools import repeat
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional

from threadpoolctl import threadpool_limits

from rlscale.fit.compare import compare
from rlscale.fit.curves import Curve, MetricError, SourceError, load_source
from rlscale.fit.outputs import clean, write_files
from rlscale.fit.pooled import below_pooled, pool_key, pooled_ratios
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitResults, FitSettings, RunFit
from rlscale.fit.window import describe_rule

__all__ = ["fit_results", "fit_curves", "write_outputs", "SourceError", "MetricError"]

RUNS_PER_PROCESS = 100


def fit_results(source: Path, settings: FitSettings, progress: Optional[Callable[[int, int], None]] = None,
                jobs: int = 1, phase: Optional[Callable[[str], None]] = None) -> FitResults:
    """Fit every run under ``source`` (a results folder, any depth, or a tidy CSV/parquet file), in
    ``jobs`` processes (0: module docstring). ``progress(done, total)`` is called with 0 once the runs are read,
    then after each run; ``phase(text)`` as each phase begins (reading the runs, fitting them, refitting the
    short ones, comparing the variants)."""
    say = phase or (lambda text: None)
    say("reading the runs")
    loaded = load_source(Path(source), settings.x, settings.y)
    settings = replace(settings, source=str(source), x_requested=settings.x, x=loaded.x_key)
    settings = replace(settings, cutoff_rule=describe_rule(settings))
    runs = fit_curves(loaded.curves, settings, progress, jobs, say)
    say("comparing the variants")
    with threadpool_limits(limits=1, user_api="blas"):  # the comparisons' fixed-A refits and seed tables too
        results = FitResults(settings=settings, runs=runs, comparison=compare(runs, loaded.sweeps, settings))
    clean(results)
    return results


def fit_curves(curves: List[Curve], settings: FitSettings, progress: Optional[Callable[[int, int], None]] = None,
               jobs: int = 1, phase: Callable[[str], None] = lambda text: None) -> List[RunFit]:
    """The RunFit of every curve, in ``jobs`` processes (0: module docstring): each fitted once, then the short
    fits below their variant's pooled residual level fitted again at that level (rlscale.fit.pooled). ``progress`` and
    ``phase``: as fit_results calls them."""
    if jobs == 0:
        jobs = min(os.cpu_count() or 1, len(curves) // RUNS_PER_PROCESS)
    with ExitStack() as stack:
        stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
        pool = None
        if jobs > 1 and len(curves) > 1:
            pool = stack.enter_context(ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                                           initializer=_one_blas_thread))

        def fit_all(chosen: List[Curve], ratios: Iterable[Optional[float]]) -> Iterator[RunFit]:
            if pool is None:
                return map(_fit_guarded, chosen, repeat(settings), ratios)
            return pool.map(_fit_guarded, chosen, repeat(settings), ratios,
                            chunksize=max(1, len(curves) // (8 * jobs)))

        runs = []
        phase("fitting")
        if progress is not None:
            progress(0, len(curves))
        for run in fit_all(curves, repeat(None)):
            runs.append(run)
            if progress is not None:
                progress(len(runs), len(curves))
        ratios = pooled_ratios(runs)
        short = [i for i, run in enumerate(runs) if pool_key(run) in ratios and below_pooled(run, ratios[pool_key(run)])]
        if short:
            phase(f"refitting {len(short)} short run(s) at their variant's pooled noise")
        for i, run in zip(short, fit_all([curves[i] for i in short], [ratios[pool_key(runs[i])] for i in short])):
            runs[i] = run
    return runs


def write_outputs(results: FitResults, out: Path) -> List[Path]:
    """Write fits.json, fits.csv and comparison.csv into ``out`` (each atomically) when at least one run
    fitted; returns their paths ([] when nothing fitted: existing files are left as they are)."""
    if not any(r.fitted for r in results.runs):
        return []
    return write_files(results, Path(out))


def _one_blas_thread() -> None:
    """A worker's BLAS on one thread for its whole life (module docstring)."""
    threadpool_limits(limits=1, user_api="blas")


def _fit_guarded(curve: Curve, settings: FitSettings, pooled_ratio: Optional[float]) -> RunFit:
    """fit_curve, with any unexpected error turned into a ``failed`` run instead of stopping the others."""
    try:
        return fit_curve(curve, settings, pooled_ratio)
    except Exception as err:  # noqa: BLE001 - one bad run must not stop the command
        return RunFit(sweep=curve.sweep, variant=curve.variant, seed=curve.seed, run_path=curve.run_path,
                      x=settings.x, points_x=curve.x.tolist(), points_y=curve.y.tolist(), status="failed",
                      message=f"{type(err).__name__}: {err}".splitlines()[0])
