"""The sink interface and the experiment trackers of ``logger=``: TensorBoard, Weights & Biases and MLflow
mirror every metrics line (train and eval records, Section 2's reward and Section 3's compute axis), hold the run's
resolved config (``rlscale.tracking.params``) and, at every eval, a completions table
(``rlscale.tracking.completions``). The tracker packages are optional imports; a missing one is one line naming the
package to install.

What each tracker holds besides the metrics:

- TensorBoard: the config as text (tag ``config``, its YAML) and as hparams (dotted keys; TensorBoard's HParams tab
  takes the run's scalars as its metrics); the completions table as text (``eval/completions``, a markdown table,
  at the eval's step).
- W&B: the config as the run's config; the completions table as a ``wandb.Table`` (``eval/completions``).
- MLflow: the config as params (dotted keys, values cut to ``MLFLOW_VALUE_CHARS``, said in the log) and as the
  artifact config.yaml; the completions table as the artifact ``completions/step_<step>.json``
  (``mlflow.log_table``).

Each tracker has its config class here (``TensorboardConfig``, ``WandbConfig``, ``MlflowConfig``; ``LoggerConfig``
for none), named by its option (``rlscale.config.registry.LOGGER``): the run's ``logger`` section is typed by it
when the config is composed, so W&B's ``logger.mode`` beside logger=mlflow is refused there. A tracker is built from
its section and the run it tracks (``TrackedRun``), never the whole run config."""
from __future__ import annotations

import logging
import math
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Protocol, Sequence

from rlscale.config.registry import LOGGER
from rlscale.knobs import knob
from rlscale.runfolder.atomic import atomic_write_text
from rlscale.tracking.completions import COLUMNS, MAX_ROWS, CompletionRow, markdown_table
from rlscale.tracking.params import MLFLOW_VALUE_CHARS, config_yaml, hparam_values, mlflow_params

log = logging.getLogger("rlscale.tracking")

LOGGER_NAME = "the tracker (``logger=NAME``)"


@dataclass
class LoggerConfig:
    """Experiment tracking: every metrics.jsonl line mirrored to a tracker (``rlscale.tracking``), with the run's
    config and a completions table at every eval."""

    name: str = knob("none", LOGGER_NAME)
    completions_rows: int = knob(8, "rows of the tracker's completions table at every eval: the first completion of "
                                 "each of the first N held-out prompts, with its reward (0: no table; unused with "
                                 "logger=none)", ge=0, le=MAX_ROWS)


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
    params:  the run's whole resolved config as plain data, logged as the tracker run's parameters.
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


class Tracker(MetricsSink, Protocol):
    """An experiment tracker: a metrics sink that also takes each eval's completions table."""

    def completions(self, step: int, rows: Sequence[CompletionRow]) -> None:
        """The completions table of the eval at ``step`` (at most ``logger.completions_rows`` rows, never empty)."""


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


def indented(text: str) -> str:
    """``text`` as a markdown code block (each line indented), shown verbatim whatever it holds."""
    return "\n".join("    " + line for line in text.splitlines())


class TensorBoardSink:
    def __init__(self, log_dir: Path, run: TrackedRun):
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        self.writer = SummaryWriter(log_dir=str(log_dir))
        self.writer.add_text("config", indented(config_yaml(run.params)), global_step=0)
        _, run_start, _ = hparams(hparam_values(run.params), {})  # metrics: the run's scalars, as TB infers
        self.writer.file_writer.add_summary(run_start)
        self.writer.flush()

    def write(self, record: Dict) -> None:
        for name, value in scalars(record).items():
            self.writer.add_scalar(name, value, global_step=int(record["step"]))
        self.writer.flush()

    def completions(self, step: int, rows: Sequence[CompletionRow]) -> None:
        self.writer.add_text("eval/completions", markdown_table(rows), global_step=step)
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

        self.wandb = wandb

    def write(self, record: Dict) -> None:
        self.run.log(scalars(record), step=int(record["step"]))

    def completions(self, step: int, rows: Sequence[CompletionRow]) -> None:
        table = self.wandb.Table(columns=list(COLUMNS), data=[row.cells() for row in rows])
        self.run.log({"eval/completions": table}, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    def __init__(self, cfg: MlflowConfig, run: TrackedRun):
        self.mlflow = _require("mlflow", "mlflow")
        if not cfg.dir:  # the file store of the run folder, which recent MLflow takes only when allowed
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.mlflow.set_tracking_uri(cfg.dir or (Path(run.run_dir) / "mlruns").resolve().as_uri())
        self.mlflow.set_experiment(cfg.project)
        self.mlflow.start_run(run_name=run.name)
        params, cut = mlflow_params(run.params)
        self.mlflow.log_params(params)
        self.mlflow.log_text(config_yaml(run.params), "config.yaml")
        if cut:
            log.info("logger=mlflow: %d parameter value(s) cut to MLflow's %d characters (%s); the whole config is "
                     "the run's config.yaml artifact", len(cut), MLFLOW_VALUE_CHARS, ", ".join(cut))

    def write(self, record: Dict) -> None:
        self.mlflow.log_metrics({k.replace("/", "."): v for k, v in scalars(record).items()},
                                step=int(record["step"]))

    def completions(self, step: int, rows: Sequence[CompletionRow]) -> None:
        columns = {name: [getattr(row, name) for row in rows] for name in COLUMNS}
        self.mlflow.log_table(data=columns, artifact_file=f"completions/step_{step:07d}.json")

    def close(self) -> None:
        self.mlflow.end_run()


def tensorboard_sink(cfg: TensorboardConfig, run: TrackedRun) -> TensorBoardSink:
    """``logger=tensorboard``: event files in ``logger.dir``, else ``tensorboard/`` in the run folder."""
    return TensorBoardSink(Path(cfg.dir) if cfg.dir else Path(run.run_dir) / "tensorboard", run)


def no_tracker(cfg: LoggerConfig, run: TrackedRun) -> None:
    """``logger=none``: metrics.jsonl only."""
    return None


def open_tracker(cfg: LoggerConfig, run: TrackedRun) -> Optional[Tracker]:
    """The tracker ``cfg`` (the run's ``logger`` section) names, or None for ``logger=none``."""
    return LOGGER.load(cfg.name)(cfg, run)
