"""Run configuration: Hydra composition into the typed schema, then semantic validation."""
from rlscale.config.compose import ConfigError, compose_run_config, load_run_config
from rlscale.config.schema import RunConfig

__all__ = ["ConfigError", "RunConfig", "compose_run_config", "load_run_config"]
