"""What ``rlscale run --cfg`` and ``--info`` print, as Hydra's own flags do (its "Debugging" page): ``--cfg
job|hydra|all`` the config, Hydra's node or both, interpolations kept unless ``--resolve``, ``--package`` one
package of it (``# @package loss`` then the package); ``--info all|config|defaults|defaults-tree|plugins|searchpath``
Hydra's report of that part of the composition. The job config is rlscale's typed, validated one (every knob of
the chosen options), and Hydra's node carries the folders rlscale uses: ``run.dir`` the run folder, ``sweep.dir``
the folder of a ``-m`` grid and ``sweep.subdir`` the run's name in it."""
from __future__ import annotations

import contextlib
import io
import logging
from typing import Optional, Sequence

from omegaconf import DictConfig, OmegaConf, flag_override

from rlscale.config.compose import ConfigError, compose_raw, compose_run_config, hydra_app, with_option_knobs
from rlscale.runfolder.names import LOG_FILE

CONFIG_PARTS = ("job", "hydra", "all")
INFO_PARTS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def shown_config(overrides: Sequence[str], config_name: str, part: str, package: Optional[str] = None,
                 resolve: bool = False, sweep_dir: str = "results/multirun") -> str:
    """The text ``--cfg part [--package P] [--resolve]`` prints; ConfigError for an unknown part or package."""
    if part not in CONFIG_PARTS:
        raise ConfigError(f"--cfg must be one of {', '.join(CONFIG_PARTS)} (got {part!r})")
    job = compose_run_config(overrides, config_name, resolve=False)
    cfg = OmegaConf.create({} if part == "hydra" else OmegaConf.to_container(job))
    if part != "job":
        cfg.hydra = _hydra_node(overrides, config_name, job, sweep_dir)
    if package in (None, "_global_"):
        chosen = cfg
    else:
        chosen = OmegaConf.select(cfg, package, default=None)
        if chosen is None:
            raise ConfigError(f"--package {package}: not found in the {part} config")
    if not isinstance(chosen, DictConfig) and not OmegaConf.is_list(chosen):
        return f"{chosen}\n"
    if resolve:
        OmegaConf.resolve(chosen)
    header = f"# @package {package}\n" if package not in (None, "_global_") else ""
    return header + OmegaConf.to_yaml(chosen)


def _hydra_node(overrides: Sequence[str], config_name: str, job: DictConfig, sweep_dir: str) -> DictConfig:
    """Hydra's node as ``--cfg hydra`` shows it (without its help texts, as Hydra leaves them out), with the
    folders rlscale writes in place of Hydra's ``outputs/<date>`` ones and the run's train.log as its log file."""
    node = compose_raw(overrides, config_name).hydra
    folders = OmegaConf.to_container(job, resolve=True)
    with flag_override(node, ["struct", "readonly"], [False, False]):
        for key in ("help", "hydra_help"):
            node.pop(key, None)
        node.run.dir = node.runtime.output_dir = folders["out"]
        node.sweep.dir = sweep_dir
        node.sweep.subdir = folders["variant"]
        if OmegaConf.select(node, "job_logging.handlers.file") is not None:  # where the run's log lines go
            node.job_logging.handlers.file.filename = f"{folders['out']}/{LOG_FILE}"
    return node


def info_text(part: str, overrides: Sequence[str], config_name: str) -> str:
    """What Hydra's ``--info part`` prints for this composition. Hydra writes it through a stdout handler it adds
    to the root logger; the text is captured here and that handler removed again."""
    if part not in INFO_PARTS:
        raise ConfigError(f"--info must be one of {', '.join(INFO_PARTS)} (got {part!r})")
    compose_run_config(overrides, config_name)  # a bad override is one line before Hydra's report
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    text = io.StringIO()
    try:
        with hydra_app() as app, contextlib.redirect_stdout(text):
            app.show_info(part, config_name=config_name, overrides=with_option_knobs(overrides))
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return text.getvalue()
