"""Entry points of one run: from a run directory holding config.yaml (what sweep jobs and sbatch
scripts call), or from Hydra overrides (``rlscale run``)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence

from omegaconf import OmegaConf

from rlscale.config import ConfigError, compose_run_config, load_run_config
from rlscale.results.atomic import atomic_write_text
from rlscale.results.status import RunState, read_status, write_status


RUN_FILES = ("metrics.jsonl", "status.json", "checkpoints/last.pt")


def train_run_dir(run_dir: Path, stop_at: Optional[int] = None, progress: bool = False) -> str:
    """Train (or resume) the run whose resolved config is ``run_dir/config.yaml``, pausing at step
    ``stop_at`` if given; return the state written to status.json (done | failed | diverged | pruned, or
    pending when paused), or done, touching nothing, when the run is ``finished``. Raises
    ``rlscale.results.errors.Refused``, writing nothing, when another process holds the run folder or its
    checkpoint cannot be resumed. ``progress``: show a progress bar on a terminal, periodic lines otherwise
    (rlscale.tracking.progress)."""
    from rlscale.train.loop import train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    run_dir = Path(run_dir)
    try:
        cfg = load_run_config(run_dir / "config.yaml")
    except ConfigError as err:
        write_status(run_dir, RunState.FAILED, str(err))
        return RunState.FAILED.value
    if finished(run_dir, int(cfg.trainer.max_steps)):
        return RunState.DONE.value
    if not progress:
        return train(cfg, run_dir, stop_at)
    from rlscale.tracking.progress import run_progress

    return train(cfg, run_dir, stop_at, [run_progress(f"{cfg.sweep}/{cfg.variant}", int(cfg.trainer.max_steps))])


def finished(run_dir: Path, max_steps: int) -> bool:
    """Whether nothing is left to train: status.json says done at ``max_steps`` and the checkpoint's seal
    records that step."""
    from rlscale.train.checkpoint import sealed_step

    status = read_status(run_dir)
    return status["state"] == RunState.DONE.value and status.get("step") == max_steps == sealed_step(run_dir)


def prepare_run_dir(overrides: Sequence[str], config_name: str = "config", force: bool = False) -> Path:
    """Compose the config, create its run directory (``out``) and write config.yaml there. An existing
    run directory with the same config is resumed (its config.yaml left as it is); a different one is
    refused unless ``force``."""
    cfg = compose_run_config(overrides, config_name)
    run_dir = Path(cfg.out)
    text = OmegaConf.to_yaml(cfg)
    existing = run_dir / "config.yaml"
    if existing.exists() and existing.read_text() != text and not force:
        raise ConfigError(f"{existing}: a run with a different config exists there; pass out=<dir> for a new "
                          "run or --force to start this one over")
    if force and run_dir.exists():
        start_over(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not existing.exists() or existing.read_text() != text:
        atomic_write_text(existing, text)
    return run_dir


def start_over(run_dir: Path) -> None:
    """Delete what the trainer wrote into ``run_dir`` (``--force``), holding its lock meanwhile."""
    from rlscale.results.lock import FolderLock

    with FolderLock(run_dir, "run folder"):
        for name in RUN_FILES:
            (Path(run_dir) / name).unlink(missing_ok=True)
