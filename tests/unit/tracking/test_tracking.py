"""Experiment trackers and the run's progress display mirror metrics lines: TensorBoard event files hold
every train/eval number at its step; a missing tracker package is one line; the plain progress lines of a
run that is not on a terminal come at most every ``every_s`` seconds, with the last step always shown."""
from __future__ import annotations

import io
import sys

import pytest
from omegaconf import OmegaConf

from rlscale.config import ConfigError, compose_run_config, packages, typed
from rlscale.runfolder.metrics import MetricsLog, read_metrics
from rlscale.tracking import TrackerMissing, open_tracker
from rlscale.tracking.progress import ProgressLines
from rlscale.tracking.sinks import tracker_run_id
from rlscale.train.components import tracked_run

RECORDS = [{"step": 0, "kind": "eval", "val_reward": 0.25, "flops": 0.0},
           {"step": 1, "kind": "train", "reward": -0.5, "flops": 1e9, "note": "text", "ok": True},
           {"step": 2, "kind": "train", "reward": 0.5, "flops": 2e9, "loss": float("nan")},
           {"step": 2, "kind": "eval", "val_reward": 0.75, "flops": 2e9}]


def test_tensorboard_mirrors_every_metrics_line(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = typed(compose_run_config(["logger=tensorboard"]))
    tracker = open_tracker(cfg.logger, tracked_run(cfg, tmp_path))
    log = MetricsLog(tmp_path / "metrics.jsonl", [tracker])
    for record in RECORDS:
        log.append(record)
    tracker.close()
    assert len(read_metrics(tmp_path / "metrics.jsonl")[0]) == 4
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert sorted(events.Tags()["scalars"]) == ["eval/flops", "eval/val_reward", "train/flops", "train/reward"]
    assert [(e.step, e.value) for e in events.Scalars("train/reward")] == [(1, -0.5), (2, 0.5)]
    assert [(e.step, e.value) for e in events.Scalars("eval/val_reward")] == [(0, 0.25), (2, 0.75)]


def test_no_logger_by_default_and_a_missing_package_is_one_line(tmp_path, monkeypatch):
    cfg = typed(compose_run_config([]))
    assert open_tracker(cfg.logger, tracked_run(cfg, tmp_path)) is None
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"field 'logger.name': mlflow needs mlflow, not installed here "
                                          r"\(pip install 'rlscale\[tracking\]'\)$"):
        compose_run_config(["logger=mlflow"])  # refused when composed, before any run starts
    with pytest.raises(Exception, match="logger.name"):
        compose_run_config(["logger.name=neptune"])


def test_a_tracker_that_fails_to_import_in_the_run_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(packages, "installed", lambda module: True)  # found when composed, gone in the run
    cfg = typed(compose_run_config(["logger=mlflow"]))
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(TrackerMissing, match=r"^logger=mlflow: the mlflow package is not installed \(pip install"):
        open_tracker(cfg.logger, tracked_run(cfg, tmp_path))


def test_wandb_defaults_to_offline(monkeypatch):
    monkeypatch.setattr(packages, "installed", lambda module: True)
    assert OmegaConf.to_container(compose_run_config(["logger=wandb"]).logger)["mode"] == "offline"


def test_plain_progress_lines_are_periodic_and_end_at_the_last_step():
    now = [0.0]
    out = io.StringIO()
    lines = ProgressLines("default/run", 4, stream=out, every_s=30.0, clock=lambda: now[0])
    lines.started()
    lines.write({"step": 0, "kind": "eval", "val_reward": 0.2})
    for step, t in zip((1, 2, 3, 4), (10.0, 20.0, 40.0, 50.0)):
        now[0] = t
        lines.write({"step": step, "kind": "train", "reward": 0.1 * step})
    lines.write({"step": 4, "kind": "eval", "val_reward": 0.6})
    assert out.getvalue().splitlines() == [
        "default/run: warming up (loading the model, compiling, the step-0 eval)",
        "default/run: step 0/4  val pass 0.200",
        "default/run: step 3/4  train reward (+-1) 0.300  val pass 0.200  eta 0m13s",  # 40 s for 3 steps: 13.3 s for the last
        "default/run: step 4/4  train reward (+-1) 0.400  val pass 0.600  eta 0m00s",
    ]


def test_progress_shows_the_train_pass_rate_on_the_validation_scale():
    out = io.StringIO()
    lines = ProgressLines("default/run", 2, stream=out, every_s=0.0, clock=lambda: 0.0)
    lines.write({"step": 0, "kind": "eval", "val_reward": 0.25})
    lines.write({"step": 2, "kind": "train", "reward": -0.5, "pass_rate": 0.25})
    assert out.getvalue().splitlines()[-1].startswith("default/run: step 2/2  train pass 0.250  val pass 0.250")


def test_tracker_ids_are_one_per_run_folder_and_stable_across_resumes(tmp_path):
    cfg = typed(compose_run_config([]))  # sweep "default", variant "run": what every plain rlscale run is called
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    one, other = tracker_run_id(tracked_run(cfg, first)), tracker_run_id(tracked_run(cfg, second))
    assert one != other and one.startswith(f"{cfg.sweep}-{cfg.variant}-")
    assert tracker_run_id(tracked_run(cfg, first)) == one  # a resume of the folder
    moved = tmp_path / "moved"
    first.rename(moved)
    assert tracker_run_id(tracked_run(cfg, moved)) == one  # the folder moved
