"""fits.json, fits.csv and comparison.csv (the contract with ``rlscale report``), written atomically.

fits.csv: one row per run, RunFit.CSV_COLUMNS, then the App. A.4 power law (pl_A, pl_B, pl_D, pl_sse,
pl_extrap_abs_err) and, for every --predict-at C, pred_C, pred_C_lo, pred_C_hi, obs_C.
comparison.csv: ComparisonRow's fields (kind "rank" and "loo" rows).
In both CSV files a text cell is ``printable`` (rlscale.runfolder.names): a folder name with a carriage return or
a byte that is not UTF-8 keeps its row whole and the file valid UTF-8; fits.json keeps the names exactly.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Dict, List

from rlscale.fit.results import COMPARISON_CSV, FITS_CSV, FITS_JSON, ComparisonRow, FitResults, RunFit
from rlscale.runfolder.atomic import atomic_write_text
from rlscale.runfolder.names import printable

POWER_LAW_COLUMNS = ("pl_A", "pl_B", "pl_D", "pl_sse", "pl_extrap_abs_err")


def clean(obj) -> None:
    """Replace non-finite floats with None and numpy scalars with Python numbers, in place, through
    nested dataclasses and lists (FitResults.to_json refuses NaN)."""
    items = [(f.name, getattr(obj, f.name)) for f in fields(obj)] if is_dataclass(obj) else enumerate(obj)
    for key, value in list(items):
        if is_dataclass(value) or isinstance(value, list):
            clean(value)
            continue
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        if is_dataclass(obj):
            setattr(obj, key, value)
        else:
            obj[key] = value


def write_files(results: FitResults, out: Path) -> List[Path]:
    """Write the three files into ``out``; returns their paths."""
    out = Path(out)
    paths = [out / FITS_JSON, out / FITS_CSV, out / COMPARISON_CSV]
    atomic_write_text(paths[0], results.to_json() + "\n")
    atomic_write_text(paths[1], _csv([_run_row(r, results.settings.predict_at) for r in results.runs],
                                     _run_columns(results.settings.predict_at)))
    atomic_write_text(paths[2], _csv([{f.name: getattr(c, f.name) for f in fields(c)} for c in results.comparison],
                                     [f.name for f in fields(ComparisonRow)]))
    return paths


def _run_columns(predict_at: List[float]) -> List[str]:
    return list(RunFit.CSV_COLUMNS) + list(POWER_LAW_COLUMNS) + [
        name for c in predict_at for name in (f"pred_{c:g}", f"pred_{c:g}_lo", f"pred_{c:g}_hi", f"obs_{c:g}")]


def _run_row(run: RunFit, predict_at: List[float]) -> Dict[str, object]:
    row = {name: getattr(run, name) for name in RunFit.CSV_COLUMNS}
    law = run.power_law
    row.update(zip(POWER_LAW_COLUMNS, (law.A, law.B, law.D, law.sse, law.extrap_abs_err) if law else [None] * 5))
    for p in run.predictions:
        c = f"{p.x:g}"
        row.update({f"pred_{c}": p.y, f"pred_{c}_lo": p.lo, f"pred_{c}_hi": p.hi, f"obs_{c}": p.observed})
    return row


def _csv(rows: List[Dict[str, object]], columns: List[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else printable(v) if isinstance(v, str) else v for k, v in row.items()}
                     for row in rows)
    return buffer.getvalue()
