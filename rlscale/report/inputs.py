"""The report's input: fits.json of RESULTS_DIR, refitted first (as ``rlscale fit`` would) when it is
missing, unreadable or older than any run's metrics.jsonl, so the page never shows stale fits."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from rlscale.fit.results import FITS_JSON, FitResults, FitSettings
from rlscale.runfolder import find_runs


def stale_reason(results_dir: Path) -> Optional[str]:
    """Why fits.json must be (re)made, or None when it is newer than every metrics.jsonl."""
    fits = Path(results_dir) / FITS_JSON
    if not fits.exists():
        return f"{FITS_JSON} is missing"
    made = fits.stat().st_mtime
    newer = [run.metrics for run in find_runs(results_dir) if run.metrics.stat().st_mtime > made]
    if newer:
        return f"{FITS_JSON} is older than {len(newer)} metrics file(s), e.g. {newer[0]}"
    return None


def load_fits(results_dir: Path, log: Callable[[str], None], save: bool = True,
              phase: Optional[Callable[[str], None]] = None,
              progress: Optional[Callable[[int, int], None]] = None) -> FitResults:
    """fits.json, after running the fitter with the previous settings (or the defaults) when stale. The
    new fits are written into ``results_dir`` when ``save`` and the folder takes them (a read-only
    results folder is reported, not an error: the report uses the fits in memory). ``phase`` and ``progress``:
    the fitter's (rlscale.fit.api.fit_results)."""
    results_dir = Path(results_dir)
    reason = stale_reason(results_dir)
    previous = _try_load(results_dir / FITS_JSON)
    if reason is None and previous is not None:
        return previous
    from rlscale.fit.api import fit_results, write_outputs

    log(f"{reason or f'{FITS_JSON} is unreadable'}: running rlscale fit on {results_dir}")
    settings = replace(previous.settings, x=previous.settings.x_requested) if previous is not None else FitSettings()
    results = fit_results(results_dir, settings, progress=progress, phase=phase)
    if save:
        try:
            write_outputs(results, results_dir)
        except OSError as err:
            log(f"fits not saved in {results_dir}: {err.strerror or err}")
    return results


def _try_load(path: Path) -> Optional[FitResults]:
    try:
        return FitResults.load(path)
    except (OSError, ValueError, TypeError, KeyError):
        return None
