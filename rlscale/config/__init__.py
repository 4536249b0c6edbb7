"""Run configuration: Hydra composition into the typed schema, then semantic validation.

The composition names are loaded on first use, so ``rlscale.config.registry`` (the option names of every
axis) is importable without Hydra."""
from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["ConfigError", "RunConfig", "compose_run_config", "load_run_config", "typed"]
_HOMES = {"ConfigError": "compose", "compose_run_config": "compose", "load_run_config": "compose", "typed": "compose",
          "RunConfig": "schema"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'rlscale.config' has no attribute {name!r}")
    return getattr(import_module(f"rlscale.config.{_HOMES[name]}"), name)
