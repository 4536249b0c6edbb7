"""Pruning a sweep: stop the variants that cannot catch up, at rungs of the planned compute.

A rung is a fraction of each run's planned steps (``trainer.max_steps``, a counted, deterministic axis),
placed on the last eval at or below it: step = floor(f x max_steps / eval_every) x eval_every. When every
run still in the sweep has evaluated at that step (or finished), each variant is fitted on its evals up to
the rung, with x = step, and its reward at ``max_steps`` predicted with an interval; the rule of
rlscale.fit.pruning decides which variants stop. The decision only reads evals at or below the rung step,
so it is the same whoever takes it and whenever: the attached ``rlscale sweep`` (every launcher), or a
local lane waiting at the rung (local runs pause there, rlscale.sweep.job). It is taken once per rung,
under a lock, and recorded in ``<sweep>/pruning.json``; each stopped run gets a ``prune.json`` request, and
the trainer stops it at its next eval after a checkpoint (state ``pruned``; ``--resume-pruned`` removes
the request and trains it on).

Pruned runs keep their data; ``rlscale fit`` fits their partial curves with status ``pruned`` and leaves
them out of every comparison, so the verdicts among the others do not depend on them.
"""
from __future__ import annotations

import fcntl
import json
import math
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
from omegaconf import OmegaConf

from rlscale.fit.curves import Curve
from rlscale.fit.predict import predict_variants
from rlscale.fit.pruning import decide
from rlscale.fit.one_run import fit_curve
from rlscale.fit.results import FitSettings
from rlscale.runfolder import atomic_write_json, read_metrics, read_status
from rlscale.runfolder.metrics import is_finite_number
from rlscale.runfolder.status import PRUNE_REQUEST, RunState
from rlscale.sweep.spec import SpecError
from rlscale.sweep.state import run_path

PRUNING_JSON = "pruning.json"
STOPPED = (RunState.FAILED.value, RunState.DIVERGED.value)
FIELDS = ("rungs", "margin", "n_boot", "ci_level")


@dataclass(frozen=True)
class PruningConfig:
    """A sweep's pruning: ``rungs`` as fractions of the planned steps, the ``margin`` on the predicted reward
    (the paper's 0.02 on A, App. A.7), the bootstrap size and interval level of the fits."""

    rungs: Tuple[float, ...] = (0.25, 0.5)
    margin: float = 0.02
    n_boot: int = 100
    ci_level: float = 0.95

    @classmethod
    def parse(cls, value: Any, where: str) -> "PruningConfig":
        """A ``pruning:`` block (``true`` for the defaults); one-line ``SpecError`` naming the field."""
        if value is True or value is None:
            return cls()
        if not isinstance(value, dict):
            raise SpecError(f"{where}: must be true or a mapping with {', '.join(FIELDS)}")
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise SpecError(f"{where}.{unknown[0]}: unknown (valid: {', '.join(FIELDS)})")
        rungs = value.get("rungs", list(cls.rungs))
        if (not isinstance(rungs, list) or not rungs or sorted(rungs) != rungs
                or not all(isinstance(r, (int, float)) and 0 < r < 1 for r in rungs)):
            raise SpecError(f"{where}.rungs: must be increasing fractions in (0, 1), got {rungs!r}")
        margin, n_boot = value.get("margin", cls.margin), value.get("n_boot", cls.n_boot)
        level = value.get("ci_level", cls.ci_level)
        if not isinstance(margin, (int, float)) or margin < 0:
            raise SpecError(f"{where}.margin: must be a number >= 0, got {margin!r}")
        if not isinstance(n_boot, int) or n_boot < 0:
            raise SpecError(f"{where}.n_boot: must be an integer >= 0, got {n_boot!r}")
        if not isinstance(level, (int, float)) or not 0 < level < 1:
            raise SpecError(f"{where}.ci_level: must be in (0, 1), got {level!r}")
        return cls(tuple(float(r) for r in rungs), float(margin), n_boot, float(level))

    def settings(self) -> FitSettings:
        return FitSettings(x="step", x_requested="step", margin=self.margin, n_boot=self.n_boot,
                           ci_level=self.ci_level)


@dataclass(frozen=True)
class SweepRun:
    """One run of the sweep as pruning sees it."""

    run: str
    variant: str
    seed: int
    run_dir: Path
    max_steps: int
    eval_every: int


def rung_step(fraction: float, max_steps: int, eval_every: int) -> int:
    """The eval step of a rung (module docstring); at least the first eval after step 0."""
    return max(eval_every, math.floor(fraction * max_steps / eval_every) * eval_every)


def rung_of(run_dir: Path, fraction: float) -> int:
    """The rung step of one run (from its config.yaml)."""
    cfg = OmegaConf.load(Path(run_dir) / "config.yaml")
    return rung_step(fraction, int(cfg.trainer.max_steps), int(cfg.trainer.eval_every))


def sweep_runs(sweep_dir: Path, record) -> List[SweepRun]:
    """The runs of a sweep record with their planned steps and eval interval (from config.yaml); run folders
    are stored relative to the sweep folder (rlscale.sweep.state.run_path)."""
    out = []
    for v in record.variants:
        run_dir = run_path(sweep_dir, v)
        cfg = OmegaConf.load(run_dir / "config.yaml")
        out.append(SweepRun(run=v.run, variant=v.name, seed=v.seed, run_dir=run_dir,
                            max_steps=int(cfg.trainer.max_steps), eval_every=int(cfg.trainer.eval_every)))
    return out


@dataclass
class RungDecision:
    """What was decided at one rung (pruning.json)."""

    fraction: float
    step: int
    variants: List[Dict[str, Any]]
    pruned: List[str]


@dataclass
class PruningRecord:
    """pruning.json: the config, the rungs decided so far, the pruned variants resumed on request, and the
    compute saved (planned steps not used by the pruned runs, as a fraction of the whole sweep's planned
    steps)."""

    config: Dict[str, Any]
    rungs: List[RungDecision] = field(default_factory=list)
    resumed: List[str] = field(default_factory=list)
    saved_fraction: float = 0.0
    saved_steps: int = 0
    planned_steps: int = 0

    @property
    def pruned(self) -> List[str]:
        """Variants pruned at some rung (resumed ones included: they stay out of later rungs)."""
        return [v for r in self.rungs for v in r.pruned]

    @property
    def stopped(self) -> List[str]:
        """Variants pruned and not resumed."""
        return [v for v in self.pruned if v not in self.resumed]


def read_pruning(sweep_dir: Path, config: PruningConfig) -> PruningRecord:
    path = Path(sweep_dir) / PRUNING_JSON
    if not path.exists():
        return PruningRecord(config=asdict(config))
    data = json.loads(path.read_text())
    return PruningRecord(config=data["config"], rungs=[RungDecision(**r) for r in data["rungs"]],
                         resumed=data.get("resumed", []), saved_fraction=data.get("saved_fraction", 0.0),
                         saved_steps=data.get("saved_steps", 0),
                         planned_steps=data.get("planned_steps", 0))


@contextmanager
def _locked(sweep_dir: Path) -> Iterator[None]:
    with open(Path(sweep_dir) / ".pruning.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _evals(run: SweepRun, upto: Optional[int] = None) -> List[dict]:
    path = run.run_dir / "metrics.jsonl"
    records = read_metrics(path)[0] if path.exists() else []
    return [r for r in records if r.get("kind") == "eval" and isinstance(r.get("step"), int)
            and is_finite_number(r.get("val_reward")) and (upto is None or r["step"] <= upto)]


def _reached(run: SweepRun, step: int) -> bool:
    state = read_status(run.run_dir).get("state")
    return state in (RunState.DONE.value, RunState.PRUNED.value) or any(r["step"] >= step for r in _evals(run))


def _curve(sweep: str, run: SweepRun, step: int) -> Curve:
    evals = _evals(run, step)
    x = np.array([float(r["step"]) for r in evals])
    return Curve(sweep=sweep, variant=run.variant, seed=run.seed, run_path=str(run.run_dir), x=x,
                 y=np.array([float(r["val_reward"]) for r in evals]), t=x.copy(),
                 se=np.array([float(r.get("val_reward_se", math.nan)) for r in evals]),
                 samples=np.array([float(r.get("val_samples", math.nan)) for r in evals]), t_axis="step")


def advance(sweep_dir: Path, record, config: PruningConfig) -> PruningRecord:
    """Decide every rung that is ready (in order), request the stops, update pruning.json; safe to call
    from several processes at once (a lock, and decisions that only read evals at or below the rung)."""
    sweep_dir = Path(sweep_dir)
    runs = sweep_runs(sweep_dir, record)
    with _locked(sweep_dir):
        state = read_pruning(sweep_dir, config)
        for index in range(len(state.rungs), len(config.rungs)):
            fraction = config.rungs[index]
            gone = set(state.pruned)
            live = [r for r in runs if r.variant not in gone
                    and read_status(r.run_dir).get("state") not in STOPPED]
            steps = {r.run: rung_step(fraction, r.max_steps, r.eval_every) for r in live}
            if not live or not all(_reached(r, steps[r.run]) for r in live):
                break
            state.rungs.append(_decide(record.name, live, steps, fraction, config))
        for run in runs:
            if run.variant in state.stopped and not (run.run_dir / PRUNE_REQUEST).exists() \
                    and read_status(run.run_dir).get("state") != RunState.DONE.value:
                rung = next(r for r in state.rungs if run.variant in r.pruned)
                atomic_write_json(run.run_dir / PRUNE_REQUEST, {
                    "rung": rung.fraction, "step": rung.step,
                    "reason": f"pruned at {rung.fraction:.0%} of the planned steps (step {rung.step}): "
                              "predicted final reward below the best's beyond the margin"})
        _account(state, runs)
        atomic_write_json(sweep_dir / PRUNING_JSON, asdict(state))
    return state


def _decide(sweep: str, live: List[SweepRun], steps: Dict[str, int], fraction: float,
            config: PruningConfig) -> RungDecision:
    settings = config.settings()
    fits = [fit_curve(_curve(sweep, r, steps[r.run]), settings) for r in live]
    at = float(max(r.max_steps for r in live))
    decisions = decide(predict_variants(fits, settings, at), config.margin, config.ci_level)
    rows = [{"variant": d.variant, "predicted": d.predicted, "lo": d.lo, "hi": d.hi,
             "gap": None if d.gap is None else asdict(d.gap), "pruned": d.pruned} for d in decisions]
    unfitted = sorted({r.variant for r, f in zip(live, fits) if not f.fitted})
    rows += [{"variant": v, "predicted": None, "lo": None, "hi": None, "gap": None, "pruned": False,
              "note": "not fitted at this rung"} for v in unfitted if v not in {d.variant for d in decisions}]
    return RungDecision(fraction=fraction, step=min(steps.values()), variants=rows,
                        pruned=[d.variant for d in decisions if d.pruned])


def _account(state: PruningRecord, runs: List[SweepRun]) -> None:
    """Planned steps the pruned runs did not use (their last step so far, else the rung's)."""
    planned = sum(r.max_steps for r in runs)
    saved = 0
    for r in runs:
        if r.variant in state.stopped and read_status(r.run_dir).get("state") != RunState.DONE.value:
            last = max((e["step"] for e in _evals(r)), default=0)
            saved += max(0, r.max_steps - last)
    state.saved_steps, state.planned_steps = saved, planned
    state.saved_fraction = saved / planned if planned else 0.0


def resume_pruned(sweep_dir: Path, record, config: PruningConfig) -> List[str]:
    """Let the pruned runs of a sweep train on: record their variants as resumed (never requested to stop
    again) and remove their prune requests (the trainer resumes each from its checkpoint). Returns the
    resumed run names."""
    sweep_dir = Path(sweep_dir)
    with _locked(sweep_dir):
        state = read_pruning(sweep_dir, config)
        state.resumed = sorted(set(state.resumed) | set(state.pruned))
        names = []
        for run in sweep_runs(sweep_dir, record):
            if run.variant in state.pruned:
                (run.run_dir / PRUNE_REQUEST).unlink(missing_ok=True)
                names.append(run.run)
        _account(state, sweep_runs(sweep_dir, record))
        atomic_write_json(sweep_dir / PRUNING_JSON, asdict(state))
    return names


def wait_for_rung(sweep_dir: Path, index: int, poll_s: float = 5.0) -> None:
    """Block until rung ``index`` of the sweep is decided, taking the decision when it is ready (a local
    lane paused at the rung)."""
    from rlscale.sweep.state import read_record

    while True:
        record = read_record(sweep_dir)
        config = PruningConfig.parse(record.pruning, f"{sweep_dir}/sweep.json: field 'pruning'")
        if len(advance(sweep_dir, record, config).rungs) > index:
            return
        time.sleep(poll_s)


def pruning_summary(state: PruningRecord) -> str:
    """One line per rung and the compute saved, for the end of ``rlscale sweep``."""
    lines = [f"rung {r.fraction:.0%} (step {r.step}): " + (f"pruned {', '.join(r.pruned)}" if r.pruned else
                                                            "nothing pruned") for r in state.rungs]
    if state.resumed:
        lines.append(f"resumed: {', '.join(state.resumed)}")
    lines.append(f"compute saved: {state.saved_steps} of {state.planned_steps} planned steps "
                 f"({state.saved_fraction:.0%} of the unpruned sweep)")
    return "\n".join(lines)
