"""What the report shows, gathered from fits.json and the run folders (the results contract, docs/results-contract.md).

Every run appears once: those that ``rlscale fit`` saw (joined to their folder by ``run_path``, else by
sweep and folder or variant name) and those it did not (a folder under RESULTS_DIR with metrics.jsonl but
no fit), so failed, diverged and unfittable runs stay on the page with their reason. Runs are read in
worker processes when asked (200 runs of 1,000 metrics lines are ~200k JSON lines).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import yaml

from rlscale.fit.curves import resolve_x
from rlscale.fit.results import ComparisonRow, FitResults, FitSettings, RunFit
from rlscale.report.job import JobView
from rlscale.report.parallel import ParallelSweep
from rlscale.report.pool import parallel_map
from rlscale.report.samples import Sample, read_samples
from rlscale.runfolder import RunDir, find_runs, read_metrics, read_status
from rlscale.runfolder.discover import read_sweep_json
from rlscale.runfolder.metrics import is_finite_number
from rlscale.runfolder.names import printable, printable_tree
from rlscale.runfolder.truncation import LEVEL as TRUNCATION_LEVEL, first_signal

# Train-line diagnostics plotted over compute (docs/results-contract.md; names fixed by the trainer).
DIAGNOSTICS = ("truncation_rate", "entropy", "kept_prompt_fraction", "lag_mean", "lag_max",
               "samples_per_s", "tokens_per_s")
# Section 2 of the paper: a truncation rate of 10-15 % destabilizes training (ScaleRL keeps it < 5 %); a run is
# flagged when its rate rises back above it (rlscale.runfolder.truncation).
TRUNCATION_FLAG = TRUNCATION_LEVEL
# A line at step 0 comes before any update (the untrained model): the diagnostics, and so the truncation
# flag, read the train lines after it.
UNTRAINED_STEP = 0
UNFINISHED_STATES = ("failed", "diverged", "preempted", "unknown")


@dataclass
class Series:
    """One metric of one run over compute (the fit's x unit): finite values only, in step order."""

    x: np.ndarray = field(default_factory=lambda: np.empty(0))
    y: np.ndarray = field(default_factory=lambda: np.empty(0))

    @classmethod
    def of(cls, pairs: List[tuple]) -> "Series":
        """From (x, y) pairs as read from JSON; pairs that are not two finite numbers are dropped."""
        try:
            xy = np.array(pairs, dtype=float).reshape(-1, 2)
        except (TypeError, ValueError):
            xy = np.array([p for p in pairs if all(map(is_finite_number, p))], dtype=float).reshape(-1, 2)
        xy = xy[np.isfinite(xy).all(axis=1)]
        return cls(xy[:, 0], xy[:, 1])


@dataclass
class RunView:
    """One run as the report shows it. ``variant`` is its variant (shared by its seeds), ``name`` the
    variant with the seed when there is one; ``anchor`` is a page-safe id (names may hold any character)."""

    anchor: str
    sweep: str
    variant: str
    name: str
    path: Optional[Path]
    fit: Optional[RunFit]
    state: str
    reason: str
    config_text: str
    eval: Series
    train: Dict[str, Series]
    warnings: List[str] = field(default_factory=list)
    samples: List[Sample] = field(default_factory=list)
    sampled_evals: int = 0
    job: JobView = field(default_factory=JobView)

    @property
    def fit_ok(self) -> bool:
        f = self.fit
        return (f is not None and f.fitted and None not in (f.A, f.B, f.C_mid)
                and f.R0 is not None)

    @property
    def fit_message(self) -> str:
        if self.fit is None:
            return "not fitted"
        if self.fit.fitted and not self.fit_ok:
            return "fit has no parameters"
        return self.fit.message if self.fit.status == "ok" else f"{self.fit.status}: {self.fit.message}"

    def last(self, metric: str) -> Optional[float]:
        ys = self.train.get(metric, Series()).y
        return float(ys[-1]) if len(ys) else None

    def mean(self, metric: str) -> Optional[float]:
        ys = self.train.get(metric, Series()).y
        return float(ys.mean()) if len(ys) else None

    def peak(self, metric: str) -> Optional[float]:
        ys = self.train.get(metric, Series()).y
        return float(ys.max()) if len(ys) else None

    @property
    def truncation_flagged(self) -> bool:
        """The truncation rate of training rose back above the paper's 10 % (its mean over 20 steps, after the
        run had held it lower: rlscale.runfolder.truncation)."""
        return first_signal(self.train.get("truncation_rate", Series()).y, TRUNCATION_FLAG) is not None

    @property
    def seed_label(self) -> str:
        """The seed as the ranking table names it ("s2"), "" when the fit has none."""
        return "" if self.fit is None or self.fit.seed is None else f"s{self.fit.seed}"


@dataclass
class VariantView:
    """One variant of a sweep as the ranking table shows it: its runs (one per seed) and the fitter's rank
    row, which is one per variant (None when the fitter made none). A and B of a variant are its seeds'
    means (App. A.7: seeds are fitted separately and compared by their mean, with the seed spread)."""

    variant: str
    runs: List[RunView]
    row: Optional[ComparisonRow]

    @property
    def fitted(self) -> List[RunView]:
        return [run for run in self.runs if run.fit_ok]

    def values(self, parameter: str) -> List[float]:
        """``parameter`` (A, B, C_mid, r2) of each fitted seed, in seed order."""
        return [v for run in self.fitted if (v := getattr(run.fit, parameter)) is not None]

    def mean(self, parameter: str) -> Optional[float]:
        values = self.values(parameter)
        return float(np.mean(values)) if values else None

    def lowest(self, parameter: str) -> Optional[float]:
        values = self.values(parameter)
        return min(values) if values else None

    def spread(self, parameter: str) -> Optional[float]:
        """The seeds' standard deviation of ``parameter`` (None with fewer than two fitted seeds)."""
        values = self.values(parameter)
        return float(np.std(values, ddof=1)) if len(values) > 1 else None

    @property
    def states(self) -> Dict[str, int]:
        """How many of its runs are in each state."""
        return dict(sorted(Counter(run.state for run in self.runs).items()))


@dataclass
class SweepView:
    """One sweep: its runs in ranking order, the fitter's rank and LOO rows, and sweep.json's plan."""

    name: str
    runs: List[RunView]
    ranking: List[ComparisonRow]
    loo: List[ComparisonRow]
    planned: Optional[int] = None

    def rank_of(self, run: RunView) -> Optional[ComparisonRow]:
        return next((row for row in self.ranking if row.variant == run.variant), None)

    @property
    def variants(self) -> List[VariantView]:
        """One entry per variant, in ranking order (its seeds in run order), unranked variants last."""
        grouped: Dict[str, List[RunView]] = {}
        for run in self.runs:
            grouped.setdefault(run.variant, []).append(run)
        return [VariantView(variant, runs, self.rank_of(runs[0])) for variant, runs in grouped.items()]


@dataclass
class ReportData:
    """Everything the page, the figures and the terminal summary read."""

    results_dir: Path
    settings: FitSettings
    sweeps: List[SweepView]
    warnings: List[str] = field(default_factory=list)
    plan: Optional[dict] = None  # plan.json of ``rlscale plan`` in the results folder, when there is one
    confirm: Optional[dict] = None  # confirm.json of ``rlscale confirm`` in the results folder, when there is one
    parallel: Dict[str, ParallelSweep] = field(default_factory=dict)  # sweep -> its runs under several metrics

    @property
    def runs(self) -> List[RunView]:
        return [run for sweep in self.sweeps for run in sweep.runs]


def load_report(results_dir: Path, fits: FitResults, n_workers: int = 1) -> ReportData:
    """Join ``fits`` with the run folders under ``results_dir`` and read each run's metrics and files
    (in ``n_workers`` processes)."""
    results_dir = Path(results_dir)
    dirs = find_runs(results_dir)
    by_path = {d.path.resolve(): d for d in dirs}
    by_name = {(d.sweep, d.variant): d for d in dirs}
    pairs: List[Tuple[Optional[RunFit], Optional[RunDir]]] = []
    used = set()
    for fit in fits.runs:
        run_dir = _folder_of(fit, results_dir, by_path, by_name)
        if run_dir is not None:
            used.add(run_dir.path.resolve())
        pairs.append((fit, run_dir))
    pairs += [(None, d) for d in dirs if d.path.resolve() not in used]

    x_unit, y_name = fits.settings.x, fits.settings.y
    jobs = [RunJob(f"run-{index}", fit, run_dir, x_unit, y_name) for index, (fit, run_dir) in enumerate(pairs)]
    grouped: Dict[str, List[RunView]] = {}
    for run in parallel_map(_run_view, jobs, n_workers):
        grouped.setdefault(run.sweep, []).append(run)

    comparison = [replace(c, sweep=printable(c.sweep), variant=printable(c.variant)) for c in fits.comparison]
    sweeps = []
    for sweep in sorted(grouped):
        ranking = [c for c in comparison if c.sweep == sweep and c.kind == "rank"]
        ranking.sort(key=lambda c: (c.rank is None, c.rank or 0))
        loo = [c for c in comparison if c.sweep == sweep and c.kind == "loo"]
        order = {row.variant: i for i, row in enumerate(ranking) if row.rank is not None}
        runs = sorted(grouped[sweep],
                      key=lambda r: (order.get(r.variant, len(order)), r.variant, _seed(r), r.name))
        sweeps.append(SweepView(sweep, runs, ranking, loo, _planned(results_dir, sweep, runs)))
    warnings = [f"{run.sweep}/{run.name}: {w}" for s in sweeps for run in s.runs for w in run.warnings]
    from rlscale.plan.confirm import CONFIRM_JSON, SweepCheck
    from rlscale.plan.planner import PLAN_JSON, SweepPlan

    return ReportData(results_dir, fits.settings, sweeps, warnings,
                      _read_sweeps(results_dir / PLAN_JSON, SweepPlan, "plan", warnings),
                      _read_sweeps(results_dir / CONFIRM_JSON, SweepCheck, "confirm", warnings))


def _read_sweeps(path: Path, record: type, command: str, warnings: List[str]) -> Optional[dict]:
    """plan.json or confirm.json (a mapping whose ``sweeps`` hold the fields of ``record``) as ``rlscale
    COMMAND`` wrote it; None (and a warning) when it is missing or unreadable."""
    if not path.exists():
        return None
    try:
        read = printable_tree(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        warnings.append(f"{path}: unreadable {command} ({type(err).__name__}); rerun rlscale {command}")
        return None
    keys = {f.name for f in fields(record)}
    if (not isinstance(read, dict) or not isinstance(read.get("sweeps"), list)
            or not all(isinstance(sweep, dict) and keys <= sweep.keys() for sweep in read["sweeps"])):
        warnings.append(f"{path}: not a {command} of this rlscale {command}; rerun rlscale {command}")
        return None
    return read


def _folder_of(fit: RunFit, root: Path, by_path: Dict[Path, RunDir],
               by_name: Dict[Tuple[str, str], RunDir]) -> Optional[RunDir]:
    """The folder of a fitted run: its run_path (absolute, relative to here or to the results folder),
    else the folder of that name in its sweep (fits made from another working directory), else the
    folder named like the variant."""
    if fit.run_path:
        path = Path(fit.run_path)
        for candidate in (path, root / path):
            found = by_path.get(candidate.resolve())
            if found is not None:
                return found
        found = by_name.get((fit.sweep, path.name))
        if found is not None:
            return found
    return by_name.get((fit.sweep, fit.variant))


@dataclass(frozen=True)
class RunJob:
    """What reading one run needs (a picklable unit of work for the worker processes)."""

    anchor: str
    fit: Optional[RunFit]
    run_dir: Optional[RunDir]
    x_unit: str
    y_name: str


def _run_view(job: RunJob) -> RunView:
    fit, run_dir = job.fit, job.run_dir
    sweep = printable(fit.sweep if fit is not None else run_dir.sweep)
    variant = printable(fit.variant if fit is not None else run_dir.variant)
    name = variant if fit is None or fit.seed is None else f"{variant} (seed {fit.seed})"
    if run_dir is None:
        return RunView(job.anchor, sweep, variant, name, None, fit, "unknown", "run folder not found", "",
                       _fit_points(fit), {}, ["run folder not found; curves from fits.json only"])
    records, warnings = read_metrics(run_dir.metrics)
    status = read_status(run_dir.path)
    try:
        config_text = run_dir.config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        config_text = ""
        warnings.append("no config.yaml")
    by_kind: Dict[str, List[dict]] = {"train": [], "eval": []}
    for rec in records:
        by_kind.setdefault(rec.get("kind", "train"), []).append(rec)
    x_unit = resolve_x(job.x_unit, [by_kind["eval"]])  # "auto" only when there are no fits to say which
    trained = [rec for rec in by_kind["train"] if rec["step"] > UNTRAINED_STEP]
    train = {metric: series for metric in DIAGNOSTICS if len((series := _series(trained, x_unit, metric)).x)}
    fit_points = _fit_points(fit)
    evals = fit_points if len(fit_points.x) else _series(by_kind["eval"], x_unit, job.y_name)
    samples, sampled_evals = read_samples(run_dir.path)
    return RunView(job.anchor, sweep, variant, name, run_dir.path, fit, str(status.get("state", "unknown")),
                   str(status.get("reason", "")), config_text, evals, train, warnings, samples, sampled_evals,
                   JobView.of(records, _parsed(config_text)))


def _parsed(config_text: str) -> dict:
    """config.yaml as a mapping ({} when it is missing or not YAML: the run's record still shows its text)."""
    try:
        config = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return {}
    return config if isinstance(config, dict) else {}


def _seed(run: RunView) -> int:
    return -1 if run.fit is None or run.fit.seed is None else run.fit.seed


def _fit_points(fit: Optional[RunFit]) -> Series:
    return Series() if fit is None else Series.of(list(zip(fit.points_x, fit.points_y)))


def _series(records: List[dict], x_unit: str, y_name: str) -> Series:
    return Series.of([(rec[x_unit], rec[y_name]) for rec in records if x_unit in rec and y_name in rec])


def _planned(results_dir: Path, sweep: str, runs: List[RunView]) -> Optional[int]:
    """How many runs sweep.json plans (one entry per run, seeds included; None without sweep.json)."""
    folders = {run.path.parent for run in runs if run.path is not None} or {results_dir / sweep}
    for folder in sorted(folders):
        spec = read_sweep_json(folder)
        variants = spec.get("variants") if isinstance(spec, dict) else None
        if isinstance(variants, list):
            return len(variants)
    return None
