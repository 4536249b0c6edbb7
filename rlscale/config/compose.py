"""Compose one run's config from ``conf/`` and Hydra overrides, typed against ``RunConfig``.

Every failure is raised as ``ConfigError`` with one line that names the override, group or field at
fault, before any compute starts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlscale.config.schema import RunConfig
from rlscale.paths import CONF_DIR


SCHEMA_NAME = "rlscale_schema"


def register_schema() -> None:
    """Make ``RunConfig`` the base of conf/config.yaml's defaults list, so every schema field can be
    overridden without a ``+`` and an unknown key fails with its name."""
    ConfigStore.instance().store(name=SCHEMA_NAME, node=RunConfig)


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message is one line naming the culprit."""


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text.split(" full_key:")[0] if "full_key:" in text else text


def compose_run_config(overrides: Sequence[str] = (), config_name: str = "config",
                       conf_dir: Path = CONF_DIR) -> DictConfig:
    """Compose ``conf_dir/config_name.yaml`` with Hydra ``overrides`` and return a typed, resolved,
    validated config (a DictConfig backed by ``RunConfig``)."""
    GlobalHydra.instance().clear()
    register_schema()
    try:
        with initialize_config_dir(config_dir=str(Path(conf_dir).resolve()), version_base="1.3"):
            raw = compose(config_name=config_name, overrides=list(overrides))
    except HydraException as err:
        cause = err.__cause__
        if getattr(cause, "full_key", None):  # a value of the wrong type: name the field and say why
            raise ConfigError(f"override error: field '{cause.full_key}': {_one_line(cause)}") from None
        raise ConfigError(f"override error: {_one_line(err)}") from None
    finally:
        GlobalHydra.instance().clear()
    return _typed(raw, source="overrides " + " ".join(overrides) if overrides else config_name)


def load_run_config(path: Path) -> DictConfig:
    """Load a resolved ``config.yaml`` written into a run directory."""
    try:
        raw = OmegaConf.load(path)
    except Exception as err:  # yaml errors come in many types
        raise ConfigError(f"{path}: unreadable config: {_one_line(err)}") from None
    return _typed(raw, source=str(path))


def _typed(raw: DictConfig, source: str) -> DictConfig:
    from rlscale.config.validate import validate

    try:
        # merge a plain copy: keys added with +key=... that the schema lacks then fail by name
        cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), OmegaConf.to_container(raw))
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        raise ConfigError(f"{source}: field '{key}': {_one_line(err)}") from None
    problems = validate(cfg)
    if problems:
        raise ConfigError(f"{source}: {problems[0]}")
    OmegaConf.set_readonly(cfg, True)
    return cfg
