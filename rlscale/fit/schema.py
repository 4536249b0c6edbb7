"""What ``rlscale fit`` produces and ``rlscale report`` reads (fits.json, fits.csv, comparison.csv).

Parameters follow Eq. 1 of the paper: R_C = R0 + (A - R0) / (1 + (C_mid / C)^B).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import List, Optional

FITS_JSON = "fits.json"
FITS_CSV = "fits.csv"
COMPARISON_CSV = "comparison.csv"
# Statuses of runs whose fit is usable: "repaired" = fitted after tolerating bad input (a torn last line,
# duplicate steps after a resume, dropped NaN/inf points, a missing or unreadable config.yaml).
FITTED_STATUSES = ("ok", "repaired")


@dataclass
class FitSettings:
    """How the fits were made (shown in the report's summary).

    ``r0`` overrides R0 (default: the reward of each run's first eval, step 0). ``min_compute`` /
    ``min_compute_frac`` override the cutoff (absolute, or a fraction of the run's compute);
    ``fit_until_frac`` is ``fit_until`` as a fraction of each run's compute. ``a_grid`` = [lo, hi, step] and
    ``c_mid_grid`` = [lo, hi, n] are App. A.5's grids (``c_mid_grid`` None: the paper's [100, 40000] x 100,
    rescaled to the run, see rlscale.fit.space); ``a_bounds`` is the fast method's range of A (Eq. 1)."""

    x: str = "gpu_hours"
    y: str = "val_reward"
    method: str = "fast"
    margin: float = 0.02
    cutoff_rule: str = ""
    fit_until: Optional[float] = None
    predict_at: List[float] = field(default_factory=list)
    ci_level: float = 0.95
    n_boot: int = 200
    seed: int = 0
    source: str = ""
    r0: Optional[float] = None
    min_compute: Optional[float] = None
    min_compute_frac: Optional[float] = None
    fit_until_frac: Optional[float] = None
    a_grid: List[float] = field(default_factory=lambda: [0.45, 0.80, 0.005])
    c_mid_grid: Optional[List[float]] = None
    a_bounds: List[float] = field(default_factory=lambda: [0.0, 1.0])


@dataclass
class Prediction:
    """Predicted reward at compute ``x`` with its bootstrap interval, and the observation there if any."""

    x: float
    y: float
    lo: Optional[float] = None
    hi: Optional[float] = None
    observed: Optional[float] = None


@dataclass
class PowerLawFit:
    """App. A.4 alternative R = A - D / C^B fitted on the same window."""

    A: Optional[float] = None
    D: Optional[float] = None
    B: Optional[float] = None
    sse: Optional[float] = None
    extrap_abs_err: Optional[float] = None
    status: str = "ok"
    message: str = ""


@dataclass
class RunFit:
    """One run's fit. ``status`` is "ok" or a reason class (no_data, too_few_points, flat, diverging,
    invalid, failed) with a one-line ``message``. ``points_x``/``points_y`` are all eval points (the
    fit used those with cutoff <= x <= fit_until)."""

    sweep: str
    variant: str
    seed: Optional[int] = None
    run_path: str = ""
    x: str = "gpu_hours"
    n_points: int = 0
    cutoff: Optional[float] = None
    cutoff_rule: str = ""
    R0: Optional[float] = None
    A: Optional[float] = None
    B: Optional[float] = None
    C_mid: Optional[float] = None
    A_lo: Optional[float] = None
    A_hi: Optional[float] = None
    B_lo: Optional[float] = None
    B_hi: Optional[float] = None
    C_mid_lo: Optional[float] = None
    C_mid_hi: Optional[float] = None
    sse: Optional[float] = None
    r2: Optional[float] = None
    fit_until: Optional[float] = None
    extrap_x: Optional[float] = None
    extrap_observed: Optional[float] = None
    extrap_predicted: Optional[float] = None
    extrap_abs_err: Optional[float] = None
    seed_std_A: Optional[float] = None
    seed_std_B: Optional[float] = None
    predictions: List[Prediction] = field(default_factory=list)
    power_law: Optional[PowerLawFit] = None
    status: str = "ok"
    message: str = ""
    points_x: List[float] = field(default_factory=list)
    points_y: List[float] = field(default_factory=list)

    @property
    def fitted(self) -> bool:
        return self.status in FITTED_STATUSES

    CSV_COLUMNS = ("sweep", "variant", "seed", "x", "n_points", "cutoff", "R0", "A", "B", "C_mid", "A_lo",
                   "A_hi", "B_lo", "B_hi", "C_mid_lo", "C_mid_hi", "sse", "r2", "fit_until",
                   "extrap_abs_err", "seed_std_A", "seed_std_B", "status", "message", "run_path", "cutoff_rule",
                   "extrap_x", "extrap_observed", "extrap_predicted")


@dataclass
class ComparisonRow:
    """A row of comparison.csv. kind "rank": the ranking of a sweep's variants by A (ties within the
    margin broken by B refit at the pair's average A). kind "loo": the leave-one-out table (Section 4):
    ``axis`` reverted, dA vs the base, ``B_fixed`` refit with the A averaged over the sweep (``A_fixed``),
    dB, and a verdict (lower ceiling / lower efficiency / within margin / base)."""

    kind: str
    sweep: str
    variant: str
    rank: Optional[int] = None
    A: Optional[float] = None
    B: Optional[float] = None
    C_mid: Optional[float] = None
    axis: str = ""
    dA: Optional[float] = None
    A_fixed: Optional[float] = None
    B_fixed: Optional[float] = None
    dB: Optional[float] = None
    verdict: str = ""
    note: str = ""


@dataclass
class FitResults:
    """The whole of fits.json."""

    settings: FitSettings
    runs: List[RunFit] = field(default_factory=list)
    comparison: List[ComparisonRow] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, allow_nan=False, default=_nan_to_none)

    @classmethod
    def from_json(cls, text: str) -> "FitResults":
        data = json.loads(text)
        runs = []
        for r in data.get("runs", []):
            r = dict(r)
            r["predictions"] = [Prediction(**p) for p in r.get("predictions", [])]
            r["power_law"] = PowerLawFit(**r["power_law"]) if r.get("power_law") else None
            runs.append(RunFit(**_known(RunFit, r)))
        return cls(settings=FitSettings(**_known(FitSettings, data.get("settings", {}))), runs=runs,
                   comparison=[ComparisonRow(**_known(ComparisonRow, c)) for c in data.get("comparison", [])])

    @classmethod
    def load(cls, path: Path) -> "FitResults":
        return cls.from_json(Path(path).read_text())


def _known(klass, data: dict) -> dict:
    names = {f.name for f in fields(klass)}
    return {k: v for k, v in data.items() if k in names}


def _nan_to_none(obj):
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
