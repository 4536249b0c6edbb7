"""Sweep specs (``sweeps/*.yaml`` and the user's, rlscale.paths): what a sweep runs, parsed into typed dataclasses.

A spec names its base variant, how the other variants derive from it (``kind``), its seeds and its
launcher. Three kinds:

- ``loo``: the leave-one-out analysis of Section 4 (Fig. 7): the base (ScaleRL) plus ``variants``, each
  reverting exactly one axis (one config group or field) to an alternative.
- ``list``: the base plus named ``variants``, each with its own Hydra overrides and optionally its own
  root config (``config: baseline`` for the Section-2 baseline): recipe comparisons (App. A.16).
- ``grid``: the cartesian product of ``axes``; ``base.name`` names the grid cell used as reference.
  Scaling sweeps (Section 5: batch size, generation length, generations per prompt) are one-axis grids.

Every error is a one-line ``SpecError`` naming the file and the field at fault.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from rlscale.paths import config_dirs, sweep_dirs
from rlscale.runfolder.names import name_problem
from rlscale.sweep.strict_yaml import DuplicateKeyError, strict_load

KINDS = ("loo", "list", "grid")
LAUNCHERS = ("local", "slurm")
SPEC_FIELDS = ("name", "kind", "description", "base", "variants", "axes", "seeds", "launcher", "overrides",
               "pruning")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SpecError(ValueError):
    """A sweep spec or sweep request that cannot be used; the message is one line naming the culprit."""


@dataclass(frozen=True)
class VariantSpec:
    """One named variant: a root config of ``conf/`` and the Hydra overrides applied on top of it."""

    name: str
    config: str
    overrides: Tuple[str, ...]


@dataclass(frozen=True)
class SweepAxis:
    """One grid axis: ``options`` are (label, overrides) pairs."""

    name: str
    options: Tuple[Tuple[str, Tuple[str, ...]], ...]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec. ``variants`` is used by loo/list specs, ``axes`` by grid specs."""

    path: Path
    name: str
    kind: str
    base: VariantSpec
    variants: Tuple[VariantSpec, ...]
    axes: Tuple[SweepAxis, ...]
    seeds: int
    launcher: str
    overrides: Tuple[str, ...]
    description: str = ""
    pruning: Any = None


def check_name(name: Any, where: str) -> str:
    """A sweep, variant or run name becomes a folder name and a SLURM job name (rlscale.runfolder.names)."""
    problem = name_problem(name)
    if problem:
        raise SpecError(f"{where}: {problem}")
    return name


def single_line(value: str, where: str) -> str:
    """A value bound for an ``#SBATCH`` line or a job's paths: a newline there would end the comment and
    start a shell command, so control characters are refused."""
    if CONTROL.search(value):
        raise SpecError(f"{where}: {value!r} contains a control character (newline, tab, ...)")
    return value


def find_spec(conf: str) -> Path:
    """``conf=NAME`` names ``NAME.yaml`` in the first of ``rlscale.paths.sweep_dirs()`` holding it; a value
    ending in .yaml/.yml is a path to a spec file."""
    if conf.endswith((".yaml", ".yml")):
        path = Path(conf)
        if not path.is_file():
            raise SpecError(f"conf={conf}: no such sweep spec file")
        return path
    for folder in sweep_dirs():
        if (folder / f"{conf}.yaml").is_file():
            return folder / f"{conf}.yaml"
    raise SpecError(f"conf={conf}: unknown sweep spec; available: {known_specs()}")


def listed_specs() -> List[Tuple[str, str, Path]]:
    """Every ``conf=NAME`` a sweep can take, as (name, description, file), the file ``find_spec`` would use; a
    spec that does not parse is listed with why."""
    found: Dict[str, Path] = {}
    for folder in sweep_dirs():
        for path in sorted(folder.glob("*.yaml")):
            found.setdefault(path.stem, path)
    listed = []
    for name, path in sorted(found.items()):
        try:
            description = str(load_spec(path).description) or "(no description)"
        except SpecError as err:
            description = f"(not usable: {err})"
        listed.append((name, description, path))
    return listed


def known_specs() -> str:
    """The spec names of every sweep folder, for error messages."""
    return ", ".join(sorted({p.stem for folder in sweep_dirs() for p in folder.glob("*.yaml")})) or "none"


def load_spec(path: Path) -> SweepSpec:
    """Parse and check a spec file (names, kinds, override lists, root configs)."""
    path = Path(path)
    try:
        data = strict_load(path.read_text())
    except DuplicateKeyError as err:
        raise SpecError(f"{path}: {err}") from None
    except (OSError, yaml.YAMLError) as err:
        raise SpecError(f"{path}: unreadable sweep spec: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a sweep spec is a mapping with fields {', '.join(SPEC_FIELDS)}")
    unknown = sorted(set(data) - set(SPEC_FIELDS))
    if unknown:
        raise SpecError(f"{path}: unknown field '{unknown[0]}' (valid: {', '.join(SPEC_FIELDS)})")
    name = check_name(data.get("name", path.stem), f"{path}: field 'name'")
    kind = data.get("kind", "list")
    if kind not in KINDS:
        raise SpecError(f"{path}: field 'kind': {kind!r} is not one of {', '.join(KINDS)}")
    launcher = data.get("launcher", "local")
    if launcher not in LAUNCHERS:
        raise SpecError(f"{path}: field 'launcher': {launcher!r} is not one of {', '.join(LAUNCHERS)}")
    seeds = data.get("seeds", 1)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise SpecError(f"{path}: field 'seeds': must be an integer >= 1, got {seeds!r}")
    base = _base(path, data.get("base"))
    variants: Tuple[VariantSpec, ...] = ()
    axes: Tuple[SweepAxis, ...] = ()
    if kind == "grid":
        if "variants" in data:
            raise SpecError(f"{path}: field 'variants': a grid spec takes 'axes', not 'variants'")
        axes = _axes(path, data.get("axes"))
    else:
        if "axes" in data:
            raise SpecError(f"{path}: field 'axes': only grid specs take axes (kind is {kind})")
        variants = _variants(path, data.get("variants"), base)
    return SweepSpec(path=path, name=name, kind=kind, base=base, variants=variants, axes=axes, seeds=seeds,
                     launcher=launcher, overrides=_overrides(path, "overrides", data.get("overrides", [])),
                     description=str(data.get("description", "")), pruning=data.get("pruning"))


def _overrides(path: Path, where: str, value: Any) -> Tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{path}: field '{where}': must be a list of Hydra overrides like 'loss=dapo', "
                        f"got {value!r}")
    return tuple(single_overrides(value, f"{path}: field '{where}'"))


def single_overrides(overrides: List[str], where: str) -> List[str]:
    """``overrides`` checked against Hydra's override grammar (rlscale.config.overrides), each one value: a
    sweep's runs are its variants and seeds, so a sweep value (``a,b``, ``range(...)``) is refused."""
    from rlscale.config import ConfigError
    from rlscale.config.overrides import check_overrides

    try:
        return check_overrides(overrides, "a sweep")
    except ConfigError as err:
        raise SpecError(f"{where}: {err}") from None


def _config(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str) or not any((d / f"{value}.yaml").is_file() for d in config_dirs()):
        known = ", ".join(sorted({p.stem for d in config_dirs() for p in d.glob("*.yaml")}))
        raise SpecError(f"{path}: field '{where}': {value!r} is not a root config ({known})")
    return value


def _base(path: Path, value: Any) -> VariantSpec:
    if not isinstance(value, dict) or "name" not in value:
        raise SpecError(f"{path}: field 'base': must be a mapping with 'name' (and optional 'config', "
                        "'overrides')")
    unknown = sorted(set(value) - {"name", "config", "overrides"})
    if unknown:
        raise SpecError(f"{path}: field 'base.{unknown[0]}': unknown (valid: name, config, overrides)")
    return VariantSpec(name=check_name(value["name"], f"{path}: field 'base.name'"),
                       config=_config(path, "base.config", value.get("config", "config")),
                       overrides=_overrides(path, "base.overrides", value.get("overrides", [])))


def _variants(path: Path, value: Any, base: VariantSpec) -> Tuple[VariantSpec, ...]:
    """``variants: {NAME: [overrides]}`` or ``{NAME: {config: ROOT, overrides: [...]}}``."""
    if not isinstance(value, dict) or not value:
        raise SpecError(f"{path}: field 'variants': must map variant names to override lists")
    out: List[VariantSpec] = []
    for name, body in value.items():
        where = f"variants.{name}"
        check_name(name, f"{path}: field '{where}'")
        if name == base.name:
            raise SpecError(f"{path}: field '{where}': the name is already the base variant's")
        if isinstance(body, dict):
            unknown = sorted(set(body) - {"config", "overrides"})
            if unknown:
                raise SpecError(f"{path}: field '{where}.{unknown[0]}': unknown (valid: config, overrides)")
            config = _config(path, f"{where}.config", body.get("config", base.config))
            overrides = _overrides(path, f"{where}.overrides", body.get("overrides", []))
        else:
            config, overrides = base.config, _overrides(path, where, body)
        out.append(VariantSpec(name=name, config=config, overrides=overrides))
    return tuple(out)


def _axes(path: Path, value: Any) -> Tuple[SweepAxis, ...]:
    """``axes: {KEY: [v1, v2]}`` (each option is ``KEY=v``, labelled ``<last part of KEY>-v``) or
    ``{AXIS: {LABEL: [overrides]}}`` for options that need several overrides."""
    if not isinstance(value, dict) or not value:
        raise SpecError(f"{path}: field 'axes': must map an override key to a list of values, or an axis "
                        "name to {label: [overrides]}")
    axes: List[SweepAxis] = []
    for key, options in value.items():
        where = f"axes.{key}"
        if isinstance(options, list) and options:
            pairs = []
            for v in options:
                if not isinstance(v, (str, int, float, bool)):
                    raise SpecError(f"{path}: field '{where}': values must be scalars, got {v!r}")
                text = str(v).lower() if isinstance(v, bool) else str(v)
                label = f"{str(key).rsplit('.', 1)[-1]}-{text}"
                pairs.append((check_name(label, f"{path}: field '{where}'"), (f"{key}={text}",)))
        elif isinstance(options, dict) and options:
            pairs = [(check_name(label, f"{path}: field '{where}.{label}'"),
                      _overrides(path, f"{where}.{label}", ovs)) for label, ovs in options.items()]
        else:
            raise SpecError(f"{path}: field '{where}': must be a non-empty list of values or a mapping "
                            "label -> overrides")
        axes.append(SweepAxis(name=str(key), options=tuple(pairs)))
    return tuple(axes)


def split_cli(args: Optional[List[str]]) -> Tuple[str, List[str]]:
    """Separate ``conf=NAME`` from the Hydra overrides of the command line."""
    conf: Optional[str] = None
    overrides: List[str] = []
    for arg in args or []:
        if arg.startswith("conf="):
            conf = arg[len("conf="):]
        elif "=" not in arg and not arg.startswith("~"):
            raise SpecError(f"argument {arg!r}: expected conf=NAME or a Hydra override KEY=VALUE")
        else:
            overrides.append(arg)
    if not conf:
        raise SpecError(f"missing conf=NAME (a sweep spec: {known_specs()}; or a path to a .yaml spec)")
    return conf, single_overrides(overrides, "rlscale sweep")
