"""Hydra's override grammar on rlscale's command lines: every override is parsed by Hydra's own
``OverridesParser`` (quoting, ``+``/``++``/``~``, lists and dicts), and a sweep value (``a,b``, ``choice(...)``,
``range(start,stop,step)``, ``glob(...)`` over a config group's options) is expanded into its values as Hydra's
basic sweeper expands it. ``interval(...)`` is a continuous range, for sweepers that sample (Optuna, Ax): a grid
cannot enumerate it, so it is refused. Every failure is one ``ConfigError`` line naming the override."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException

from rlscale.config.compose import ConfigError, hydra_app, refuse_hydra_overrides


@dataclass(frozen=True)
class Swept:
    """One sweep override: ``key`` as Hydra writes it (``+`` or ``~`` prefix, ``@package`` included) and its
    values, each written as an override value (``key=value`` reads it back)."""

    key: str
    values: Tuple[str, ...]

    @property
    def overrides(self) -> Tuple[str, ...]:
        return tuple(f"{self.key}={value}" for value in self.values)


def hydra_quote(value: str) -> str:
    """A Hydra override value that reads back as exactly ``value`` (a single-quoted string)."""
    value = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    return "'" + value.replace("'", "\\'") + "'"


def parse_overrides(overrides: Sequence[str], config_loader=None) -> List[Override]:
    """``overrides`` parsed by Hydra's grammar; ``config_loader`` lists a group's options for ``glob``."""
    try:
        return OverridesParser.create(config_loader=config_loader).parse_overrides(list(overrides))
    except HydraException as err:
        raise ConfigError(f"override error: {' '.join(str(err).split())}") from None


def check_overrides(overrides: Sequence[str], where: str) -> List[str]:
    """``overrides`` checked against Hydra's grammar, each a single value (a sweep value is refused: ``where``
    takes one config per run)."""
    for override in parse_overrides(overrides):
        if override.is_sweep_override():
            raise ConfigError(f"override {override.input_line!r}: {where} takes one value per override; sweep "
                              "values with rlscale run -m or a grid spec")
    return list(overrides)


def split_sweeps(overrides: Sequence[str]) -> Tuple[List[Swept], List[str]]:
    """``(sweeps, fixed)`` of a multirun's ``overrides``: each sweep override expanded into its values (a glob
    over the options of its config group, conf/<group>/*.yaml and the options registered in Hydra's config
    store), in the order given, and the single-valued overrides as written."""
    refuse_hydra_overrides(overrides)
    sweeps: List[Swept] = []
    fixed: List[str] = []
    with hydra_app() as app:
        for override in parse_overrides(overrides, app.config_loader):
            if not override.is_sweep_override():
                fixed.append(override.input_line)
                continue
            sweeps.append(Swept(override.get_key_element(), _values(override, app.config_loader)))
    return sweeps, fixed


def _values(override: Override, config_loader) -> Tuple[str, ...]:
    line = override.input_line
    if override.is_interval_sweep():
        raise ConfigError(f"override {line!r}: interval() is a continuous range for sampling sweepers; a grid "
                          "takes a,b, choice(...), range(start,stop,step) or glob(...)")
    try:
        values = tuple(str(v) for v in override.sweep_string_iterator())
    except HydraException as err:
        raise ConfigError(f"override {line!r}: {' '.join(str(err).split())}") from None
    if values:
        return values
    options = config_loader.get_group_options(override.key_or_group)
    found = (f"the options of config group '{override.key_or_group}' are {', '.join(options)}" if options
             else f"'{override.key_or_group}' is not a config group")
    raise ConfigError(f"override {line!r}: the sweep has no values ({found})")

