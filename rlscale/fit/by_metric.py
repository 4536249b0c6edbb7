"""Fits of several eval metrics of the same runs (``rlscale fit --y val_reward,val_reward/code``): the in-
distribution reward beside a mixture's parts or the downstream sets (docs/results-contract.md).

Each metric is fitted on its own, exactly as a single ``--y`` is (Eq. 1, App. A.4-A.7). The first metric's
files are the results folder's own (fits.json, fits.csv, comparison.csv: what ``rlscale report`` and
``rlscale plan`` read); each further metric's are in ``fits-<metric>/`` beside them, ``/`` written as ``--``
(``fits-val_reward--code/``). ``fits-metrics.json`` lists the metrics of the last fit, in order; a fit of one
metric removes it, so the report never pairs today's curves with another day's folders.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Tuple

from rlscale.fit.results import FITS_JSON, FitResults
from rlscale.runfolder.atomic import atomic_write_text

INDEX = "fits-metrics.json"


def metric_folder(out: Path, metric: str) -> Path:
    """Where a further metric's fits go: ``fits-<metric>/`` with ``/`` written as ``--``."""
    return Path(out) / f"fits-{metric.replace('/', '--')}"


def write_index(out: Path, metrics: List[str]) -> List[Path]:
    """Record the metrics of this fit (several) or remove the record of an earlier one (one metric)."""
    path = Path(out) / INDEX
    if len(metrics) < 2:
        path.unlink(missing_ok=True)
        return []
    atomic_write_text(path, json.dumps({"metrics": metrics}, indent=2) + "\n")
    return [path]


def further_fits(results_dir: Path) -> Tuple[List[FitResults], List[str]]:
    """The further metrics' fits that the last ``rlscale fit`` wrote with the folder's own, in its order (none
    when it fitted one metric), and the metrics left out because their fits.json is missing or older than the
    folder's own (refitted since, e.g. by ``rlscale report`` after more training)."""
    path = Path(results_dir) / INDEX
    own = Path(results_dir) / FITS_JSON
    if not path.is_file() or not own.is_file():
        return [], []
    fresh, stale = [], []
    for metric in json.loads(path.read_text())["metrics"][1:]:
        file = metric_folder(results_dir, metric) / FITS_JSON
        if file.is_file() and file.stat().st_mtime >= own.stat().st_mtime:
            fresh.append(FitResults.load(file))
        else:
            stale.append(metric)
    return fresh, stale
