"""Compose one run's config from ``conf/`` (and the user's folders) and Hydra overrides, typed against ``RunConfig``.

Every failure is raised as ``ConfigError`` with one line that names the override, group or field at
fault, before any compute starts.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import re
import typing
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from hydra import compose, version
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.config_store import ConfigStore
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from rlscale.config.axis import Axis
from rlscale.config.registry import TASK, TYPED_BY_OPTION
from rlscale.config.schema import FLAT_DEFAULTS, FLAT_UNREAD, NESTED_TASKS, RunConfig, task_sections
from rlscale.paths import config_dirs


SCHEMA_NAME = "rlscale_schema"


def register_schema() -> None:
    """Make ``RunConfig`` the base of conf/config.yaml's defaults list, so every schema field can be
    overridden without a ``+`` and an unknown key fails with its name. The sections typed by their option
    (``TYPED_BY_OPTION``) and the entries of ``NESTED_TASKS`` are plain mappings there: each is typed once the
    option is known (``_validated``)."""
    node = OmegaConf.structured(RunConfig)
    for axis in TYPED_BY_OPTION:
        node[axis.section] = {"name": node[axis.section].name}
    for section, leaf in NESTED_TASKS:  # entries whose task is typed by its name: plain mappings too (OmegaConf 2.3
        node[section]._get_node(leaf)._metadata.element_type = Any  # keeps a list's element type there)
    ConfigStore.instance().store(name=SCHEMA_NAME, node=node)


def with_option_knobs(overrides: Sequence[str]) -> List[str]:
    """``overrides`` with each plain ``SECTION.KNOB=VALUE`` of a section typed by its option (``loss.clip=0.5``)
    written as Hydra's add-or-override ``++``, and so each knob of a mixture part's or downstream set's task
    (``mixture.parts.0.task.path=...``): which knobs a section has depends on the option chosen, so the composed
    mapping may lack the key; the option's config class then checks it (``_validated``)."""
    sections = {axis.section for axis in TYPED_BY_OPTION}

    def knob_of_option(key: str) -> bool:
        return ("." in key and key.partition(".")[0] in sections) or _NESTED_TASK_KNOB.match(key) is not None

    return [f"++{item}" if item[:1] not in "+~" and knob_of_option(item.partition("=")[0]) else item
            for item in overrides]


_NESTED_TASK_KNOB = re.compile("|".join(rf"{section}\.{leaf}\.\d+\.task\." for section, leaf in NESTED_TASKS))


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message is one line naming the culprit."""


class ForeignKnob(ConfigError):
    """A knob of another option of the same axis (``length.window`` with length=penalty); ``field`` is its dotted
    name. A sweep's shared overrides may set one for the variants whose option has it (rlscale.sweep.resolve)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text.split(" full_key:")[0] if "full_key:" in text else text


def refuse_hydra_overrides(overrides: Sequence[str]) -> None:
    """rlscale composes configs with Hydra's compose API and has no Hydra job runtime: ``hydra.*``
    settings (run.dir, sweep.dir, job_logging, ...) would be silently ignored, so they are refused."""
    for item in overrides:
        key = item.lstrip("+~").split("=", 1)[0]
        if key == "hydra" or key.startswith(("hydra.", "hydra/")):
            raise ConfigError(f"override {item!r}: rlscale does not use Hydra's job runtime; set the run folder "
                              "with out=DIR, a sweep's with --results DIR")


@contextlib.contextmanager
def hydra_app() -> Iterator[Hydra]:
    """Hydra's app over ``rlscale.paths.config_dirs()`` (the user's folders first), set as the global Hydra until
    the block ends: what composes configs, and the config loader that lists a group's options (a ``glob`` sweep).
    The search path is built with two internal functions of Hydra 1.3, the version pyproject.toml pins: the public
    API cannot put folders before the one that holds config.yaml (tests/unit/config/test_hydra_pin.py).
    Hydra's errors leave as ConfigError."""
    GlobalHydra.instance().clear()
    register_schema()
    *users, main = config_dirs()
    search_path = create_config_search_path(str(main.resolve()))  # the primary folder is Hydra's "main"
    for folder in users:
        search_path.prepend(provider="rlscale user", path=folder.resolve().as_uri(), anchor=SearchPathQuery(provider="main"))
    try:
        version.setbase("1.3")
        yield Hydra.create_main_hydra2(task_name="rlscale", config_search_path=search_path)  # sets GlobalHydra
    except HydraException as err:
        raise ConfigError(_hydra_error(err)) from None
    finally:
        GlobalHydra.instance().clear()


def compose_raw(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose ``config_name`` (``hydra_app``) with ``overrides``; Hydra's own node is kept (``rlscale run --cfg
    hydra``)."""
    refuse_hydra_overrides(overrides)
    with hydra_app():
        return compose(config_name=config_name, overrides=with_option_knobs(overrides), return_hydra_config=True)


_MISSING_OPTION = re.compile(r"Could not find '(?P<group>[^']+)/(?P<name>[^']+)'\s*Available options in '[^']*':"
                             r"(?P<options>.*)")


def _hydra_error(err: HydraException) -> str:
    cause = err.__cause__
    if getattr(cause, "full_key", None):  # a value of the wrong type: name the field and say why
        return f"override error: {_field_error(cause.full_key, cause)}"
    text = _one_line(err).split(" Config search path:")[0]  # the search path is Hydra's, not the user's business
    missing = _MISSING_OPTION.search(text)
    if missing:
        options = missing["options"].split()
        return (f"override error: {missing['group']}={missing['name']}: no such option; the options are "
                f"{', '.join(options)}{_suggestion(missing['name'], options)}")
    return f"override error: {text}".replace("add --multirun to your command line", "use rlscale run -m")


def _suggestion(word: str, candidates: Sequence[str], prefix: str = "") -> str:
    """``; did you mean 'X'?`` for the closest of ``candidates`` (difflib), or ""."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""


def _key_suggestion(key: str) -> str:
    """A did-you-mean for an unknown dotted key: the closest field of its parent section in ``RunConfig``."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.structured(RunConfig)
    for part in filter(None, parent.split(".")):
        node = node.get(part) if isinstance(node, DictConfig) else None
    if not isinstance(node, DictConfig):
        return ""
    return _suggestion(leaf, [str(k) for k in node.keys()], f"{parent}." if parent else "")


def compose_run_config(overrides: Sequence[str] = (), config_name: str = "config", resolve: bool = True) -> DictConfig:
    """Compose ``config_name`` with Hydra ``overrides`` (``compose_raw``) and return a typed, resolved,
    validated config (a DictConfig backed by ``RunConfig``); ``resolve=False``: validated the same, its
    interpolations (``out: results/${sweep}/${variant}``) left as they are (``rlscale run --cfg job``)."""
    raw = compose_raw(overrides, config_name)
    with open_dict(raw):
        del raw["hydra"]
    return _validated(raw, source="overrides " + " ".join(overrides) if overrides else config_name, resolve=resolve)


def typed(cfg: DictConfig) -> RunConfig:
    """The ``RunConfig`` of a config that ``compose_run_config`` or ``load_run_config`` returned: what a run is
    handed, from its entry (``rlscale.train.entry``) to its loop and components. The DictConfig stays where
    config.yaml is written and read."""
    return OmegaConf.to_object(cfg)


def load_run_config(path: Path) -> DictConfig:
    """Load a resolved ``config.yaml`` written into a run directory. An empty, unparseable or non-mapping
    file is refused: the schema's defaults never stand in for a run's own config."""
    try:
        raw = OmegaConf.load(path)
    except Exception as err:  # yaml errors come in many types
        raise ConfigError(f"{path}: unreadable config: {_one_line(err)}") from None
    if not isinstance(raw, DictConfig):
        raise ConfigError(f"{path}: not a mapping of config fields; a run's config.yaml holds its resolved config")
    if not raw:
        raise ConfigError(f"{path}: empty; a run's config.yaml holds its resolved config")
    return _validated(raw, source=str(path), written=True)


def _field_error(key: Optional[str], err: Exception) -> str:
    """``field 'KEY': why``; a field that older configs had says where its meaning lives now."""
    from rlscale.config.validate import retired_problem

    unknown = isinstance(err, (ConfigKeyError, ConfigAttributeError)) and key is not None
    return retired_problem(str(key)) or f"field '{key}': {_one_line(err)}{_key_suggestion(key) if unknown else ''}"


SHELL_FIELDS = (("launcher", "setup"),)  # lists of shell lines: their ${...} is the shell's, never OmegaConf's
_UNESCAPED = re.compile(r"(?<!\\)\$\{")


def _shell_literal(text: str) -> str:
    """``text`` with every ``${`` escaped as OmegaConf reads a literal (``\\${``), once."""
    return _UNESCAPED.sub(lambda _: "\\${", text)


def _escape_shell_fields(fields: dict) -> None:
    """Escape the ``${`` of the ``SHELL_FIELDS`` of a plain config, in place: ``export
    HF_HOME=${SCRATCH:-$HOME}/hf`` reaches the script as written."""
    for section, key in SHELL_FIELDS:
        node = fields.get(section)
        if isinstance(node, dict) and isinstance(node.get(key), list):
            node[key] = [_shell_literal(str(line)) for line in node[key]]


def _escape_resolved_shell_fields(cfg: DictConfig) -> None:
    """The same after ``OmegaConf.resolve``, which stores an escaped string unescaped (the next read would take
    it for an interpolation): each line's stored text, read unresolved, escaped again."""
    for section, key in SHELL_FIELDS:
        lines = cfg[section]._get_node(key)
        for index in range(len(lines)):
            lines[index] = _shell_literal(str(lines._get_node(index)._value()))


def _validated(raw: DictConfig, source: str, written: bool = False, resolve: bool = True) -> DictConfig:
    """The typed, resolved, validated, read-only config of ``raw``: each section typed by its option
    (``_option_section``), every other field by ``RunConfig``. ``written``: ``raw`` is a config.yaml, whose
    sections may hold the knobs of older schemas (``FLAT_DEFAULTS``). ``resolve=False``: the same config with its
    interpolations kept (validated resolved)."""
    from rlscale.config.validate import validate

    fields = OmegaConf.to_container(raw)
    _escape_shell_fields(fields)
    try:
        unread = {section: dict(knobs) for section, knobs in (fields.get("unread") or {}).items()}
        sections, tasks = {}, {}
        for axis in TYPED_BY_OPTION:
            sections[axis.section], dropped = _option_section(axis, fields.get(axis.section), written)
            if dropped:
                unread[axis.section] = {**unread.get(axis.section, {}), **dropped}
        for where, key, entry in task_sections(fields):  # each part's and set's task, typed by its own name
            tasks[key], dropped = _option_section(TASK, entry.pop("task"), written, where, key)
            _check_entry(entry, key, where.removesuffix(".task"))
            if dropped:
                unread[where] = {**unread.get(where, {}), **dropped}
        # merge a plain copy: keys added with +key=... that the schema lacks then fail by name
        cfg = OmegaConf.merge(OmegaConf.structured(RunConfig),
                              {key: value for key, value in fields.items() if key not in sections},
                              {"unread": unread})
        for section, node in sections.items():
            cfg[section] = node
        for key, node in tasks.items():
            section, leaf, index, _ = key.split(".")
            cfg[section][leaf][int(index)].task = node
        kept = cfg if resolve else copy.deepcopy(cfg)
        OmegaConf.resolve(cfg)
        _escape_resolved_shell_fields(cfg)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{source}: {_field_error(getattr(err, 'full_key', None), err)}") from None
    except ForeignKnob as err:  # before ValueError, which it is: the field stays with it
        raise ForeignKnob(f"{source}: {err}", err.field) from None
    except ValueError as err:
        raise ConfigError(f"{source}: {err}") from None
    problems = validate(cfg)
    if problems:
        raise ConfigError(f"{source}: {problems[0]}")
    OmegaConf.set_readonly(kept, True)
    return kept


def _option_section(axis: Axis, fields: Any, written: bool, where: str = "",
                    key: str = "") -> Tuple[DictConfig, Dict[str, Any]]:
    """The section of ``axis`` typed by its option's config class (``Axis.config_class``), and the knobs of an older
    flat schema that a written file's section held off their defaults for an option that never read them (kept for
    the run's identity: ``RunConfig.unread``). A knob the option does not have fails with its dotted name and the
    closest knob it has. ValueError for a name the axis does not take. ``where``: the section's dotted name in
    messages, ``key`` in overrides (a mixture part's task: ``mixture.parts[0].task``, ``mixture.parts.0.task``);
    both ``axis.section`` when not given."""
    from rlscale.config.validate import retired_problem

    where, key = where or axis.section, key or axis.section
    section = dict(fields) if isinstance(fields, dict) else {}
    name = section.get("name", getattr(RunConfig(), axis.section).name)
    problem = axis.problem(name)
    if problem:
        raise ValueError(problem.replace(f"field '{axis.section}.", f"field '{where}.", 1))
    klass = axis.config_class(name)
    known = {f.name for f in dataclasses.fields(klass)}
    dropped: Dict[str, Any] = {}
    if written:  # knobs an older flat schema wrote for every option, never read by this one
        flat = FLAT_DEFAULTS[axis.section]
        if axis.section in FLAT_UNREAD:
            dropped = {k: v for k, v in section.items() if k not in known and k in flat and v != flat[k]}
        section = {k: v for k, v in section.items()
                   if k not in dropped and (k in known or k not in flat or v != flat[k])}
    unknown = [knob for knob in section if knob not in known]
    if unknown and retired_problem(f"{axis.section}.{unknown[0]}"):  # a field of an older schema: where it went
        raise ValueError(retired_problem(f"{axis.section}.{unknown[0]}"))
    if unknown:
        elsewhere = [other for other in axis.names if other != name
                     and unknown[0] in {f.name for f in dataclasses.fields(axis.config_class(other))}]
        chosen = f"{where}.{axis.field.rpartition('.')[2]}"  # a group of presets is not named by its options
        hint = (f"; it is a knob of {' and '.join(f'{chosen if axis.presets else where}={o}' for o in elsewhere)}"
                if elsewhere else _suggestion(unknown[0], sorted(known), f"{where}."))
        line = (f"field '{where}.{unknown[0]}': {chosen}={name} has no such knob (its knobs: "
                f"{', '.join(sorted(known - {'name'})) or 'none'}){hint}")
        raise ForeignKnob(line, f"{key}.{unknown[0]}") if elsewhere else ValueError(line)
    return _merged(klass, section, where), dropped


def _merged(klass: type, fields: Dict[str, Any], where: str) -> DictConfig:
    """``fields`` typed by the dataclass ``klass``; ValueError naming the field at fault under ``where``."""
    try:
        return OmegaConf.merge(OmegaConf.structured(klass), fields)
    except OmegaConfBaseException as err:
        failed = getattr(err, "full_key", None)
        raise ValueError(_field_error(f"{where}.{failed}" if failed else where, err)) from None


def _check_entry(entry: Dict[str, Any], key: str, where: str) -> None:
    """A mixture part's or downstream set's own fields (its task apart) checked against its class, so a field at
    fault is named with its place (``mixture.parts[0].weight``): merged into the run's list, it is named alone."""
    section, leaf = key.split(".")[:2]
    _merged(typing.get_args(typing.get_type_hints(type(getattr(RunConfig(), section)))[leaf])[0], entry, where)
