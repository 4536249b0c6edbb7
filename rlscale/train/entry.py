"""Entry points of one run: from a run directory holding config.yaml (what sweep jobs and sbatch
scripts call), or from Hydra overrides (``rlscale run``)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf, read_write

from rlscale.config import ConfigError, compose_run_config, load_run_config, typed
from rlscale.config.overrides import hydra_quote
from rlscale.config.schema import RunConfig, without_default_sections
from rlscale.runfolder.atomic import atomic_write_text
from rlscale.runfolder.names import LOG_FILE, run_name
from rlscale.runfolder.status import RunState, read_status, write_status


RUN_FILES = ("metrics.jsonl", "status.json", ".status-reserve", "checkpoints/last.pt", LOG_FILE)
log = logging.getLogger("rlscale.train")


def train_run_dir(run_dir: Path, stop_at: Optional[int] = None, progress: bool = False,
                  cfg: Optional[RunConfig] = None) -> str:
    """Train (or resume) the run whose resolved config is ``run_dir/config.yaml``, pausing at step
    ``stop_at`` if given; return the state written to status.json (done | failed | diverged | pruned, or
    pending when paused), or done, touching nothing, when the run is ``finished``. ``cfg``: that config,
    typed, when this process has already validated it (``prepare_run_dir``, ``rlscale run``); else the file is
    read and validated here, once (the process of a job starts here). Raises
    ``rlscale.runfolder.errors.Refused``, writing nothing, when another process holds the run folder or its
    checkpoint cannot be resumed. ``progress``: show a progress bar on a terminal, periodic lines otherwise
    (rlscale.tracking.progress)."""
    from rlscale.train.logs import run_logging
    from rlscale.train.loop import train

    run_dir = Path(run_dir)
    if cfg is None:
        try:
            cfg = typed(load_run_config(run_dir / "config.yaml"))
        except ConfigError as err:
            write_status(run_dir, RunState.FAILED, str(err))
            return RunState.FAILED.value
    if finished(run_dir, cfg.trainer.max_steps):
        return RunState.DONE.value
    name, steps = f"{cfg.sweep}/{cfg.variant}", cfg.trainer.max_steps
    display = None
    if progress:
        from rlscale.tracking.progress import run_progress

        display = run_progress(name, steps)
    with run_logging(run_dir, name, steps, progress_shown=progress, console=getattr(display, "console", None)) as sinks:
        if display is not None:
            sinks.append(display)
        state = train(cfg, run_dir, stop_at, sinks)
        log.info("%s at step %s", state, read_status(run_dir).get("step"))
    return state


def finished(run_dir: Path, max_steps: int) -> bool:
    """Whether nothing is left to train: status.json says done, the checkpoint's seal records the step it
    ended at, and that step is ``max_steps``, or the run stopped early (No-Positive-Resampling removed every
    prompt) for a ``max_steps`` at least this one. A done run is final; only a larger ``max_steps``
    (``extend_run``) trains it again."""
    from rlscale.train.checkpoint import sealed_step

    status = read_status(run_dir)
    if status["state"] != RunState.DONE.value or status.get("step") != sealed_step(run_dir):
        return False
    return status.get("step") == max_steps or (bool(status.get("stopped_early"))
                                               and int(status.get("max_steps", -1)) >= max_steps)


EXTEND_KEY = "trainer.max_steps"


def requested_steps(run_dir: Path, overrides: Sequence[str]) -> Optional[int]:
    """The step count of ``trainer.max_steps=N``, the one override an existing run directory takes (None
    without overrides). Raises ConfigError for any other override or a value that is not a whole number."""
    wrong = [o for o in overrides if o.partition("=")[0] != EXTEND_KEY]
    if wrong:
        raise ConfigError(f"--run-dir {run_dir}: override {wrong[0]!r}: an existing run takes only "
                          f"{EXTEND_KEY}=N (to extend it); pass out=<dir> for a run with another config")
    if not overrides:
        return None
    try:
        return int(overrides[-1].partition("=")[2])
    except ValueError:
        raise ConfigError(f"override {overrides[-1]!r}: {EXTEND_KEY} must be a whole number") from None


def extend_run(run_dir: Path, cfg: DictConfig, max_steps: int) -> DictConfig:
    """Give the run of ``run_dir`` (whose validated config is ``cfg``) ``max_steps`` steps: its config.yaml gets
    the new count (written atomically, nothing else touched) and the next train_run_dir continues the curve from
    the last checkpoint; returns ``cfg`` with that count. Raises ConfigError, writing nothing, below the step the
    run has reached or for a run that has trained but kept no checkpoint to continue from, and FolderBusy
    (``Refused``), writing nothing, while another process holds the run folder."""
    from rlscale.runfolder.lock import FolderLock
    from rlscale.train.checkpoint import sealed_step

    path = Path(run_dir) / "config.yaml"
    with FolderLock(run_dir, "run folder"):  # a folder another process trains is refused before this write
        raw = OmegaConf.load(path)
        sealed = sealed_step(run_dir)
        reached = max(int(read_status(run_dir).get("step") or 0), sealed or 0)
        where = f"override {EXTEND_KEY}={max_steps}"
        if max_steps < max(reached, 1):
            raise ConfigError(f"{where}: {run_dir} has reached step {reached}; {EXTEND_KEY} can only grow")
        if reached and sealed is None:
            raise ConfigError(f"{where}: {run_dir} has no checkpoint to continue from (it reached step {reached}); "
                              "--force starts it over")
        if int(raw.trainer.max_steps) != max_steps:
            raw.trainer.max_steps = max_steps
            atomic_write_text(path, OmegaConf.to_yaml(raw))
    extended = cfg.copy()
    with read_write(extended):
        extended.trainer.max_steps = max_steps
    return extended


def named_run(overrides: Sequence[str]) -> List[str]:
    """``overrides`` with ``variant=<run_name(overrides)>`` when none of them places the run folder (``out=``,
    ``variant=``): each distinct run of ``rlscale run`` gets its own folder under ``results/<sweep>/``, and the
    same command again finds the same folder."""
    if any(o.lstrip("+~").partition("=")[0] in ("out", "variant") for o in overrides):
        return list(overrides)
    return [*overrides, f"variant={hydra_quote(run_name(overrides))}"]


def as_written(err: ConfigError, overrides: Sequence[str]) -> ConfigError:
    """``err`` of a config composed with ``named_run(overrides)``, naming only the overrides the user wrote."""
    named = " ".join(named_run(overrides))
    return ConfigError(str(err).replace(f"overrides {named}", f"overrides {' '.join(overrides)}", 1))


def prepare_run_dir(overrides: Sequence[str], config_name: str = "config",
                    force: bool = False) -> Tuple[Path, DictConfig]:
    """Compose and validate the config (its folder named by ``named_run``), create its run directory (``out``) and
    write config.yaml there, with the records of how it was made (rlscale.train.records); returns the folder
    and the validated config, which the run takes as it is (``train_run_dir``'s ``cfg``). An existing run
    directory with the same config is resumed (its config.yaml left as it is); a different one is refused
    unless ``force``."""
    from rlscale.train.records import write_records

    try:
        cfg = compose_run_config(named_run(overrides), config_name)
    except ConfigError as err:
        raise as_written(err, overrides) from None
    run_dir = Path(cfg.out)
    existing = run_dir / "config.yaml"
    same = existing.exists() and holds(existing, cfg)
    if existing.exists() and not same and not force:
        raise ConfigError(f"{existing}: a run with a different config exists there; pass out=<dir> for a new "
                          "run or --force to start this one over")
    if force and run_dir.exists():
        start_over(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not same:
        atomic_write_text(existing, OmegaConf.to_yaml(cfg))
    write_records(run_dir, overrides)
    return run_dir, cfg


def holds(path: Path, cfg: DictConfig) -> bool:
    """Whether the config.yaml at ``path`` is ``cfg``'s: the same text, or the same fields once the sections an
    older file lacks read as their defaults (``rlscale.config.schema.ABSENT_AS_DEFAULT``)."""
    if path.read_text() == OmegaConf.to_yaml(cfg):
        return True
    try:
        written = OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # an unreadable file holds no config, whatever yaml raised
        return False
    return isinstance(written, dict) and (without_default_sections(written)
                                          == without_default_sections(OmegaConf.to_container(cfg)))


def start_over(run_dir: Path) -> None:
    """Delete what the trainer wrote into ``run_dir`` (``--force``), holding its lock meanwhile."""
    from rlscale.runfolder.lock import FolderLock

    with FolderLock(run_dir, "run folder"):
        for name in RUN_FILES:
            (Path(run_dir) / name).unlink(missing_ok=True)
