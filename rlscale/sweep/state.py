"""Sweep state on disk: ``results/<sweep>/sweep.json`` and each run's ``config.yaml`` (docs/results-contract.md, the
results contract). Every write is atomic; sweep.json is what ``rlscale fit`` reads to group runs into
variants and to find the LOO base and axes (Section 4)."""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from omegaconf import OmegaConf

from rlscale.config.schema import without_default_sections
from rlscale.runfolder import atomic_write_json, atomic_write_text
from rlscale.runfolder.names import LOG_FILE
from rlscale.sweep.resolve import ResolvedRun
from rlscale.sweep.spec import SpecError, SweepSpec

SWEEP_JSON = "sweep.json"
RUN_FILES = ("metrics.jsonl", "samples.jsonl", "status.json", "checkpoints", LOG_FILE)


@dataclass
class VariantRecord:
    """One run of the sweep. ``name`` is the variant (shared by its seeds), ``run`` the folder name,
    ``overrides`` the variant's own overrides (the sweep-wide ones are in ``SweepRecord.overrides``),
    ``run_dir`` relative to the sweep folder, so a copied or moved results folder still finds its runs
    (``run_path``; records written with absolute paths still read)."""

    name: str
    run: str
    config: str
    overrides: List[str]
    axis: Optional[str]
    seed: int
    run_dir: str


@dataclass
class SweepRecord:
    """The whole of sweep.json. ``jobs`` maps a run folder name to its launcher job id (SLURM
    ``<array>_<task>``, or the local controller's process id); ``pruning`` is the sweep's pruning config
    (rlscale.sweep.prune.PruningConfig as a mapping), None when it is not pruned."""

    name: str
    kind: str
    base: str
    launcher: str
    spec: str
    seeds: int
    overrides: List[str]
    variants: List[VariantRecord]
    jobs: Dict[str, str] = field(default_factory=dict)
    pruning: Optional[dict] = None
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "SweepRecord":
        known = {f.name for f in fields(cls)}
        body = {k: v for k, v in data.items() if k in known}
        body["variants"] = [VariantRecord(**{k: v for k, v in var.items() if k in VariantRecord.__annotations__})
                            for var in data.get("variants", [])]
        return cls(**body)


def run_path(sweep_dir: Path, variant: VariantRecord) -> Path:
    """The run folder of ``variant``: its stored path against the sweep folder; an absolute path from an
    older record that no longer exists (the folder was copied or moved) falls back to ``<sweep>/<run>``."""
    stored = Path(variant.run_dir)
    if not stored.is_absolute():
        return Path(sweep_dir) / stored
    return stored if stored.exists() else Path(sweep_dir) / variant.run


def sweep_json(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / SWEEP_JSON


def read_record(sweep_dir: Path) -> Optional[SweepRecord]:
    """The sweep's record, or None when there is none; an unreadable one is an error naming the file."""
    path = sweep_json(sweep_dir)
    if not path.exists():
        return None
    try:
        return SweepRecord.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise SpecError(f"{path}: unreadable sweep record: {' '.join(str(err).split())}") from None


def write_record(sweep_dir: Path, record: SweepRecord) -> None:
    record.updated = time.time()
    atomic_write_json(sweep_json(sweep_dir), record.to_json())


def new_record(spec: SweepSpec, resolved: Sequence[ResolvedRun], cli: Sequence[str], seeds: int,
               previous: Optional[SweepRecord]) -> SweepRecord:
    """The record of this invocation; job ids and creation time carry over from ``previous``."""
    variants = [VariantRecord(name=r.run.variant, run=r.run.name, config=r.run.config,
                              overrides=list(r.run.overrides), axis=r.run.axis, seed=int(r.cfg.seed),
                              run_dir=r.run_dir.relative_to(r.run_dir.parent).as_posix()) for r in resolved]
    record = SweepRecord(name=spec.name, kind=spec.kind, base=spec.base.name,
                         launcher=str(resolved[0].cfg.launcher.name), spec=str(spec.path), seeds=seeds,
                         overrides=[*spec.overrides, *spec.base.overrides, *cli], variants=variants)
    if previous is not None:
        names = {v.run for v in variants}
        record.jobs = {run: job for run, job in previous.jobs.items() if run in names}
        record.created = previous.created
    return record


def config_text(run: ResolvedRun) -> str:
    return OmegaConf.to_yaml(run.cfg)


def config_conflict(run: ResolvedRun, ignore_steps: bool = False) -> Optional[str]:
    """The first top-level field where the run's existing config.yaml differs from the new one, or None
    (no config yet, or the same; a section that an older config.yaml lacks reads as its default). ``out`` is not
    compared: the run folder is the same one by construction,
    and a folder written with absolute paths keeps resuming after a copy; ``ignore_steps`` leaves out
    ``trainer.max_steps`` too."""
    path = run.run_dir / "config.yaml"
    if not path.exists():
        return None
    try:
        old = OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # an unreadable old config is a conflict, whatever yaml raised
        return "config.yaml (unreadable)"
    if not isinstance(old, dict):
        return "config.yaml (not a mapping)"
    old, new = (without_default_sections(config) for config in (old, OmegaConf.to_container(run.cfg)))
    for config in (old, new):
        config.pop("out", None)
        if ignore_steps and isinstance(config.get("trainer"), dict):
            config["trainer"].pop("max_steps", None)
    if old == new:
        return None
    keys = sorted(set(old) | set(new), key=str)
    return next(str(k) for k in keys if old.get(k) != new.get(k))


def planned_steps(run: ResolvedRun) -> Optional[int]:
    """``trainer.max_steps`` of the run's existing config.yaml (None without a readable one)."""
    try:
        return int(OmegaConf.load(run.run_dir / "config.yaml").trainer.max_steps)
    except Exception:  # missing or unreadable: config_conflict names it
        return None


def write_config(run: ResolvedRun) -> None:
    atomic_write_text(run.run_dir / "config.yaml", config_text(run))


def has_progress(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).exists() for name in ("metrics.jsonl", "checkpoints"))


def clear_run(run_dir: Path) -> None:
    """Remove what the trainer wrote (metrics, samples, status, checkpoints, its log) so the run starts from scratch."""
    for name in RUN_FILES:
        path = Path(run_dir) / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
