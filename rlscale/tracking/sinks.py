"""The sink interface and the experiment trackers of ``logger=``: TensorBoard, Weights & Biases and MLflow
mirror every metrics line (train and eval records, Section 2's reward and Section 3's compute axis). The
tracker packages are optional imports; a missing one is one line naming the package to install."""
from __future__ import annotations

import math
import os
import re
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Dict, Optional, Protocol

from rlscale.config.registry import LOGGER
from rlscale.config.schema import RunConfig
from rlscale.runfolder.atomic import atomic_write_text


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


def tracker_run_id(cfg: RunConfig, run_dir: Path) -> str:
    """``<sweep>-<variant>-<token>``: one tracker run per run folder. The token is drawn when the folder first
    logs and kept in it (TRACKER_ID), so a resume, or the folder moved, continues the same tracker run, while
    two folders of one sweep and variant name (two results folders, two plain ``rlscale run``) never share
    one."""
    path = Path(run_dir) / TRACKER_ID
    try:
        token = path.read_text().strip()
    except OSError:
        token = ""
    if not re.fullmatch(r"[0-9a-f]{12}", token):
        token = uuid.uuid4().hex[:12]
        atomic_write_text(path, token + "\n")
    return f"{cfg.sweep}-{cfg.variant}-{token}".replace("/", "-")


class WandbSink:
    def __init__(self, cfg: RunConfig, run_dir: Path):
        wandb = _require("wandb", "wandb")
        mode = os.environ.get("WANDB_MODE", cfg.logger.mode)  # offline unless configured
        self.run = wandb.init(project=cfg.logger.project, name=f"{cfg.sweep}/{cfg.variant}", mode=mode,
                              dir=str(cfg.logger.dir or run_dir), config=_plain(cfg), resume="allow",
                              id=tracker_run_id(cfg, run_dir))

    def write(self, record: Dict) -> None:
        self.run.log(scalars(record), step=int(record["step"]))

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    def __init__(self, cfg: RunConfig, run_dir: Path):
        self.mlflow = _require("mlflow", "mlflow")
        self.mlflow.set_tracking_uri(cfg.logger.dir or (run_dir / "mlruns").resolve().as_uri())
        self.mlflow.set_experiment(cfg.logger.project)
        self.mlflow.start_run(run_name=f"{cfg.sweep}/{cfg.variant}")

    def write(self, record: Dict) -> None:
        self.mlflow.log_metrics({k.replace("/", "."): v for k, v in scalars(record).items()},
                                step=int(record["step"]))

    def close(self) -> None:
        self.mlflow.end_run()


def _plain(cfg: RunConfig) -> dict:
    return asdict(cfg)


def tensorboard_sink(cfg: RunConfig, run_dir: Path) -> TensorBoardSink:
    """``logger=tensorboard``: event files in ``logger.dir``, else ``tensorboard/`` in the run folder."""
    return TensorBoardSink(Path(cfg.logger.dir) if cfg.logger.dir else Path(run_dir) / "tensorboard")


def no_tracker(cfg: RunConfig, run_dir: Path) -> None:
    """``logger=none``: metrics.jsonl only."""
    return None


def open_tracker(cfg: RunConfig, run_dir: Path) -> Optional[MetricsSink]:
    """The tracker ``cfg.logger`` names, or None for ``logger=none``."""
    return LOGGER.load(cfg.logger.name)(cfg, Path(run_dir))
