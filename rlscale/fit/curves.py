"""Reward-vs-compute curves to fit, from a results folder (the results contract, docs/results-contract.md) or from a
tidy CSV / parquet file (columns ``run``, ``x``, ``y``; optional ``seed``, ``sweep``) made with any trainer.

Every problem with one run becomes that curve's status and notes, never an exception: a torn last line or
duplicate steps after a resume are handled by the tolerant reader (noted), non-finite points are dropped
(noted), no eval points gives ``no_data``, no finite point gives ``invalid``. A missing or unreadable
config.yaml only costs the seed, which then comes from a ``_s<N>`` (or ``-s<N>``) suffix of the folder name.

Besides x and y, each point carries its position on a counted axis ``t`` (the eval line's ``flops`` when
every eval of the run has it, else its ``step``; a tidy file's x) on which the fit window is decided
(rlscale.fit.window), the standard error of y (``<y>_se``) and the eval size (``val_samples``) when the
line reports them, and the number of distinct eval prompts (``val_prompts``); a mixture part's or a downstream
set's ``val_reward/<name>`` has its own (``val_reward_se/<name>``, ...: ``companion_keys``). ``--x auto`` resolves to
``gpu_hours`` when every run's eval lines carry it, else to ``flops``. A metric named in ``--x``/``--y``
that no eval line of a folder holds is a ``MetricError`` listing the metrics found (a mistyped name), raised before anything is fitted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from rlscale.runfolder import find_runs, read_metrics, read_status
from rlscale.runfolder.discover import RunDir, read_sweep_json
from rlscale.runfolder.metrics import is_finite_number

TIDY_SUFFIXES = (".csv", ".parquet", ".pq")
TIDY_COLUMNS = ("run", "x", "y")
_SEED_SUFFIX = re.compile(r"^(?P<variant>.+)[_-]s(?P<seed>\d+)$")
_NOTED_STATES = ("running", "failed", "diverged", "preempted")


AUTO_X = "auto"
SAMPLES_KEY = "val_samples"
PROMPTS_KEY = "val_prompts"


class SourceError(ValueError):
    """The source as a whole cannot be read (a usage error, unlike a bad run)."""


class MetricError(SourceError):
    """``--x`` or ``--y`` names a metric that no eval line holds."""


@dataclass
class Curve:
    """One run's eval points sorted by x. ``status`` is "ok" or the reason no fit is possible
    (``message``); ``notes`` are one-phrase remarks carried into the run's message. ``pruned``: the run
    was stopped early by its sweep (status.json state ``pruned``): a partial curve."""

    sweep: str
    variant: str
    seed: Optional[int]
    run_path: str
    x: np.ndarray
    y: np.ndarray
    t: np.ndarray = field(default_factory=lambda: np.empty(0))
    se: np.ndarray = field(default_factory=lambda: np.empty(0))
    samples: np.ndarray = field(default_factory=lambda: np.empty(0))
    prompts: np.ndarray = field(default_factory=lambda: np.empty(0))
    t_axis: str = ""
    notes: List[str] = field(default_factory=list)
    status: str = "ok"
    message: str = ""
    repaired: bool = False
    pruned: bool = False


@dataclass
class Source:
    """All curves of a source, the sweep.json of each sweep folder that has one (by sweep name), and the
    x unit in force (``--x auto`` resolved)."""

    curves: List[Curve]
    sweeps: Dict[str, dict]
    x_key: str


def load_source(source: Path, x_key: str, y_key: str) -> Source:
    """Curves from a results folder (any depth) or a tidy file (whose x is GPU-hours under ``auto``)."""
    source = Path(source)
    if source.is_dir():
        runs = find_runs(source)
        sweeps = {run.sweep: spec for run in runs if (spec := read_sweep_json(run.path.parent)) is not None}
        read = [(run, *read_metrics(run.metrics)) for run in runs]
        evals = [[r for r in records if r.get("kind") == "eval"] for _, records, _ in read]
        x_key = resolve_x(x_key, evals)
        _check_metrics(evals, x_key, y_key)
        return Source(curves=[_run_curve(run, records, warnings, x_key, y_key, _variant_names(sweeps.get(run.sweep)))
                              for run, records, warnings in read], sweeps=sweeps, x_key=x_key)
    if source.suffix.lower() in TIDY_SUFFIXES and source.is_file():
        return Source(curves=_tidy_curves(source), sweeps={}, x_key="gpu_hours" if x_key == AUTO_X else x_key)
    if not source.exists():
        raise SourceError(f"{source} does not exist")
    raise SourceError(f"{source} is neither a results folder nor a tidy {'/'.join(TIDY_SUFFIXES)} file")


def split_seed(name: str) -> Tuple[str, Optional[int]]:
    """``loss_dapo_s2`` (or ``loss_dapo-s2``) -> ("loss_dapo", 2); names without the suffix -> (name, None)."""
    match = _SEED_SUFFIX.match(name)
    return (match["variant"], int(match["seed"])) if match else (name, None)


def _variant_names(spec) -> Dict[str, str]:
    """Run folder -> variant name, from the ``run`` and ``name`` of sweep.json's variants (if listed)."""
    entries = spec.get("variants") if isinstance(spec, dict) else None
    if not isinstance(entries, list):
        return {}
    return {v["run"]: v["name"] for v in entries
            if isinstance(v, dict) and isinstance(v.get("run"), str) and isinstance(v.get("name"), str)}


def resolve_x(x_key: str, evals: List[List[dict]]) -> str:
    """``auto``: gpu_hours when every eval line of every run carries it (runs on GPUs), else flops (the
    trainer writes core_hours, not gpu_hours, on CPU); any other unit as given."""
    if x_key != AUTO_X:
        return x_key
    lines = [r for run in evals for r in run]
    return "gpu_hours" if lines and all(is_finite_number(r.get("gpu_hours")) for r in lines) else "flops"


def _check_metrics(evals: List[List[dict]], x_key: str, y_key: str) -> None:
    """A MetricError when eval lines exist but none holds ``x_key`` or ``y_key``."""
    lines = [r for run in evals for r in run]
    if not lines:
        return
    found = sorted({k for r in lines for k, v in r.items() if k != "kind" and is_finite_number(v)})
    for option, key in (("--x", x_key), ("--y", y_key)):
        if key != "step" and not any(key in r for r in lines):
            raise MetricError(f"{option} {key!r} is in no eval line; eval metrics found: {', '.join(found)}")


def companion_keys(y_key: str) -> Tuple[str, str, str]:
    """The keys of y's standard error, eval samples and distinct eval prompts in an eval line: ``<y>_se``,
    ``val_samples`` and ``val_prompts``; for a mixture part's or a downstream set's ``val_reward/<name>``
    those of the part or set: ``val_reward_se/<name>``, ``val_samples/<name>`` and ``val_prompts/<name>``
    (docs/results-contract.md)."""
    base, slash, name = y_key.partition("/")
    suffix = slash + name
    return f"{base}_se{suffix}", f"{SAMPLES_KEY}{suffix}", f"{PROMPTS_KEY}{suffix}"


def _run_curve(run: RunDir, records: List[dict], warnings: List[str], x_key: str, y_key: str,
               names: Dict[str, str]) -> Curve:
    """The curve of a run folder; its variant is sweep.json's name for the folder, else the folder name
    without a seed suffix."""
    variant, seed = split_seed(run.variant)
    variant = names.get(run.variant, variant)
    notes: List[str] = []
    config_seed = _config_seed(run, notes)
    notes += [w.split(": ", 1)[-1] for w in warnings]
    repaired = bool(notes)  # so far only repairs: a missing/unreadable config, skipped or duplicate lines
    state = read_status(run.path).get("state")
    if state in _NOTED_STATES:
        notes.append(f"run {state}")
    evals = [r for r in records if r.get("kind") == "eval"]
    usable = [r for r in evals if (x_key == "step" or x_key in r) and y_key in r]
    t_key = "flops" if usable and all(is_finite_number(r.get("flops")) for r in usable) else "step"
    se_key, samples_key, prompts_key = companion_keys(y_key)
    rows = [(r.get("step") if x_key == "step" else r.get(x_key), r.get(y_key), r.get(t_key), r.get(se_key),
             r.get(samples_key), r.get(prompts_key)) for r in usable]
    curve = _curve(run.sweep, variant, config_seed if config_seed is not None else seed, str(run.path),
                   [row for row in rows if row[0] is not None and row[1] is not None], notes, t_key)
    curve.repaired = curve.repaired or repaired
    curve.pruned = state == "pruned"
    if not evals:
        curve.status, curve.message = "no_data", "no eval lines in metrics.jsonl"
    elif curve.status == "no_data":
        curve.message = f"no eval line has both {x_key!r} and {y_key!r}"
    return curve


def _config_seed(run: RunDir, notes: List[str]) -> Optional[int]:
    """The ``seed:`` key of config.yaml; a missing or unreadable file is noted and gives None."""
    import yaml

    if not run.config.exists():
        notes.append("no config.yaml")
        return None
    try:
        config = yaml.load(run.config.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        notes.append(f"unreadable config.yaml ({type(err).__name__})")
        return None
    if not isinstance(config, dict):
        notes.append("unreadable config.yaml (not a mapping)")
        return None
    seed = config.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _tidy_curves(path: Path) -> List[Curve]:
    import pandas as pd

    try:
        frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except (OSError, ValueError, ImportError) as err:
        raise SourceError(f"cannot read {path}: {err}") from err
    missing = [c for c in TIDY_COLUMNS if c not in frame.columns]
    if missing:
        raise SourceError(f"{path.name} lacks column(s) {', '.join(missing)} (needs run, x, y; optional seed, sweep)")
    frame = frame.assign(sweep=frame["sweep"].astype(str) if "sweep" in frame.columns else path.stem,
                         run=frame["run"].astype(str))
    has_seed = "seed" in frame.columns
    curves = []
    for (sweep, run), group in frame.groupby(["sweep", "run"], sort=True, dropna=False):
        variant, suffix_seed = (run, None) if has_seed else split_seed(run)
        seeds = group["seed"] if has_seed else [suffix_seed] * len(group)
        by_seed: Dict[Optional[int], list] = {}
        for seed, x, y in zip(seeds, group["x"], group["y"]):
            by_seed.setdefault(_as_seed(seed), []).append((_as_number(x), _as_number(y), _as_number(x), None, None, None))
        for seed, rows in by_seed.items():
            curve = _curve(sweep, variant, seed, f"{path}#{run}", rows, [], "x")
            if curve.status == "no_data":
                curve.message = "no rows with numeric x and y"
            curves.append(curve)
    return curves


def _curve(sweep: str, variant: str, seed: Optional[int], run_path: str, rows: Iterable[tuple],
           notes: List[str], t_axis: str) -> Curve:
    """A curve from raw (x, y, t, se, samples, prompts) rows: those with non-finite x or y dropped and noted,
    the rest sorted by x; a missing or non-finite t, se, samples or prompts becomes NaN."""
    pairs = list(rows)
    finite = [(float(x), float(y), *(float(v) if is_finite_number(v) else np.nan for v in rest))
              for x, y, *rest in pairs if is_finite_number(x) and is_finite_number(y)]
    dropped = len(pairs) - len(finite)
    finite.sort(key=lambda p: p[0])
    columns = [np.array(v, dtype=float) for v in zip(*finite)] if finite else [np.empty(0)] * 6
    x, y, t, se, samples, prompts = columns
    curve = Curve(sweep=sweep, variant=variant, seed=seed, run_path=run_path, x=x, y=y, t=t, se=se,
                  samples=samples, prompts=prompts, t_axis=t_axis, notes=notes)
    if not pairs:
        curve.status = "no_data"
    elif not finite:
        curve.status, curve.message = "invalid", f"all {len(pairs)} eval points have non-finite x or y"
    elif dropped:
        notes.append(f"{dropped} non-finite point(s) dropped")
        curve.repaired = True
    return curve


def _as_number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _as_seed(value) -> Optional[int]:
    number = _as_number(value)
    return int(number) if number is not None and np.isfinite(number) else None
