"""The sink interface and the experiment trackers of ``logger=``: TensorBoard, Weights & Biases and MLflow
mirror every metrics line (train and eval records, Section 2's reward and Section 3's compute axis). The
tracker packages are optional imports; a missing one is one line naming the package to install.

Each tracker has its config class here (``TensorboardConfig``, ``WandbConfig``, ``MlflowConfig``; ``LoggerConfig``
for none), named by its option (``rlscale.config.registry.LOGGER``): the run's ``logger`` section is typed by it
when the config is composed, so W&B's ``logger.mode`` beside logger=mlflow is refused there. A tracker is built from
its section and the run it tracks (``TrackedRun``), never the whole run config."""
from __future__ import annotations

import math
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Protocol

from rlscale.config.registry import LOGGER
from rlscale.knobs import knob
from rlscale.runfolder.atomic import atomic_write_text

LOGGER_NAME = "the tracker (``logger=NAME``)"


@dataclass
class LoggerConfig:
    """Experiment tracking: every metrics.jsonl line mirrored to a tracker (``rlscale.tracking``)."""

    name: str = knob("none", LOGGER_NAME)


@dataclass
class TensorboardConfig(LoggerConfig):
    """Where TensorBoard's event files go."""

    name: str = knob("tensorboard", LOGGER_NAME)
    dir: Optional[str] = knob(None, "TensorBoard's log folder (default: tensorboard/ in the run folder)")


@dataclass
class WandbConfig(LoggerConfig):
    """The Weights & Biases project, its mode and its local folder."""

    name: str = knob("wandb", LOGGER_NAME)
    dir: Optional[str] = knob(None, "the folder W&B writes its files in (default: the run folder)")
    project: str = knob("rlscale", "the W&B project")
    mode: str = knob("offline", "W&B's mode (``WANDB_MODE`` in the environment wins)")


@dataclass
class MlflowConfig(LoggerConfig):
    """MLflow's tracking URI and experiment."""

    name: str = knob("mlflow", LOGGER_NAME)
    dir: Optional[str] = knob(None, "MLflow's tracking URI (default: mlruns/ in the run folder)")
    project: str = knob("rlscale", "the MLflow experiment")


@dataclass(frozen=True)
class TrackedRun:
    """The run a tracker follows, made from the run's config by ``rlscale.train.components.tracked_run``.

    name:    ``<sweep>/<variant>``, the tracker run's display name.
    run_dir: the run folder.
    params:  the run's whole config as plain data, logged as the tracker run's parameters (W&B).
    """

    name: str
    run_dir: Path
    params: Dict[str, Any]


class TrackerMissing(RuntimeError):
    """``logger=NAME`` without the NAME package installed; the message says what to install."""


class MetricsSink(Protocol):
    def write(self, record: Dict) -> None:
        """One metrics line (a dict with ``step`` and ``kind``), after it is in metrics.jsonl."""

    def close(self) -> None:
        """Flush and release; called once when the run ends."""


def scalars(record: Dict) -> Dict[str, float]:
    """The record's finite numbers, named ``<kind>/<field>`` (booleans and text left out)."""
    kind = record.get("kind", "train")
    return {f"{kind}/{key}": float(value) for key, value in record.items()
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value)}


def _require(module: str, extra: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise TrackerMissing(f"logger={extra}: the {extra} package is not installed "
                             f"(pip install {extra}, or pip install 'rlscale[tracking]')") from None


class TensorBoardSink:
    def __init__(self, log_dir: Path):
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, record: Dict) -> None:
        for name, value in scalars(record).items():
            self.writer.add_scalar(name, value, global_step=int(record["step"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


TRACKER_ID = "tracker_id"  # in the run folder: the token that makes the run's tracker id its own


def tracker_run_id(run: TrackedRun) -> str:
    """``<sweep>-<variant>-<token>``: one tracker run per run folder. The token is drawn when the folder first
    logs and kept in it (TRACKER_ID), so a resume, or the folder moved, continues the same tracker run, while
    two folders of one sweep and variant name (two results folders, two plain ``rlscale run``) never share
    one."""
    path = Path(run.run_dir) / TRACKER_ID
    try:
        token = path.read_text().strip()
    except OSError:
        token = ""
    if not re.fullmatch(r"[0-9a-f]{12}", token):
        token = uuid.uuid4().hex[:12]
        atomic_write_text(path, token + "\n")
    return f"{run.name}-{token}".replace("/", "-")


class WandbSink:
    def __init__(self, cfg: WandbConfig, run: TrackedRun):
        wandb = _require("wandb", "wandb")
        mode = os.environ.get("WANDB_MODE", cfg.mode)  # offline unless configured
        self.run = wandb.init(project=cfg.project, name=run.name, mode=mode, dir=str(cfg.dir or run.run_dir),
                              config=run.params, resume="allow", id=tracker_run_id(run))

    def write(self, record: Dict) -> None:
        self.run.log(scalars(record), step=int(record["step"]))

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    def __init__(self, cfg: MlflowConfig, run: TrackedRun):
        self.mlflow = _require("mlflow", "mlflow")
        self.mlflow.set_tracking_uri(cfg.dir or (Path(run.run_dir) / "mlruns").resolve().as_uri())
        self.mlflow.set_experiment(cfg.project)
        self.mlflow.start_run(run_name=run.name)

    def write(self, record: Dict) -> None:
        self.mlflow.log_metrics({k.replace("/", "."): v for k, v in scalars(record).items()},
                                step=int(record["step"]))

    def close(self) -> None:
        self.mlflow.end_run()


def tensorboard_sink(cfg: TensorboardConfig, run: TrackedRun) -> TensorBoardSink:
    """``logger=tensorboard``: event files in ``logger.dir``, else ``tensorboard/`` in the run folder."""
    return TensorBoardSink(Path(cfg.dir) if cfg.dir else Path(run.run_dir) / "tensorboard")


def no_tracker(cfg: LoggerConfig, run: TrackedRun) -> None:
    """``logger=none``: metrics.jsonl only."""
    return None


def open_tracker(cfg: LoggerConfig, run: TrackedRun) -> Optional[MetricsSink]:
    """The tracker ``cfg`` (the run's ``logger`` section) names, or None for ``logger=none``."""
    return LOGGER.load(cfg.name)(cfg, run)
