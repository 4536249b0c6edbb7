"""The registry type of every design axis: the names one config field accepts, what each selects, and the
code that acts on each, named ``module:attribute`` and imported only when that name is chosen (choosing
``task.name=math`` never imports the reasoning-gym task, ``model.name=tiny`` never the Hugging Face loader).

An axis that takes plug-ins also accepts a value ``module:attribute`` of the user's own: it is imported when the
config is validated, and refused with one line naming the field and the value when it does not import or does
not provide the axis's interface (``PlugIn``). This module imports nothing of rlscale, so anything may import it.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import typing
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple, TypeVar, Union

T = TypeVar("T")


def resolve(path: str) -> Any:
    """The object that ``module:attribute`` names (``package.module:Class.method`` included); ImportError or
    AttributeError when there is none."""
    module, _, attribute = path.partition(":")
    found = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


@dataclass(frozen=True)
class Option:
    """One name of an axis. doc: one line saying what it selects. factory: ``module:attribute`` of the code that
    acts on it, called with the axis's arguments (``Axis.load``); None when no code is chosen by the name: a
    label whose config group file sets the fields that act (``precision=bf16_head`` sets
    ``precision.lm_head_fp32=false``), or a value handed as it is to the one place that reads it. config:
    ``module:attribute`` of the option's config class where no factory's argument names it (a launcher, a
    label: ``Axis.config``); None: its factory's annotation does, or the axis's options share one type."""

    doc: str
    factory: Optional[str] = None
    config: Optional[str] = None


@dataclass(frozen=True)
class PlugIn:
    """What a value ``module:attribute`` of an axis must name.

    protocol:   ``module:attribute`` of the typing.Protocol the plug-in provides.
    built_from: the arguments a class is built from when the protocol describes its instances (a Task is built
                from its TaskConfig, ``("cfg",)``); empty when the object itself provides the protocol (a loss
                function provides ``__call__``).
    doc:        one line for ``docs/configuration.md``.
    entry_points: the group of the Python entry points by which an installed package offers plug-ins under
                names of their own (``[project.entry-points."rlscale.losses"] clipped = "my_pkg.losses:clipped"``
                makes ``loss.name=clipped`` select it, and ``rlscale run --help`` list it); empty: none.
    """

    protocol: str
    built_from: Tuple[str, ...] = ()
    doc: str = ""
    entry_points: str = ""

    def installed(self) -> Dict[str, str]:
        """name -> ``module:attribute`` of every plug-in an installed package offers (``entry_points``)."""
        if not self.entry_points:
            return {}
        return {point.name: point.value for point in importlib.metadata.entry_points(group=self.entry_points)}

    def problem(self, found: Any) -> Optional[str]:
        """Why ``found`` does not provide the protocol, None when it does."""
        members = _protocol_members(resolve(self.protocol))
        if self.built_from:
            if not isinstance(found, type):
                return "it is not a class"
            if not _takes(found, self.built_from):
                return f"it cannot be built from ({', '.join(self.built_from)})"
        elif "__call__" in members:
            arguments = tuple(inspect.signature(members["__call__"]).parameters)[1:]  # without self
            if not callable(found):
                return "it is not callable"
            if not _takes(found, arguments):
                return f"it cannot be called with ({', '.join(arguments)})"
        missing = [name for name in members if name != "__call__" and not _provides(found, name)]
        return f"it lacks {', '.join(missing)}" if missing else None


def _protocol_members(protocol: type) -> Dict[str, Any]:
    """Name -> the protocol's function (None for a data member) of every public member and ``__call__``."""
    members: Dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass.__module__ in ("typing", "builtins"):
            continue
        members.update((name, None) for name in getattr(klass, "__annotations__", {}))
        members.update((name, value) for name, value in vars(klass).items()
                       if callable(value) and (not name.startswith("_") or name == "__call__"))
    return members


def _provides(found: Any, name: str) -> bool:
    """``found`` has the member ``name``: an attribute, or a data member its class declares."""
    declared = (n for klass in getattr(found, "__mro__", ()) for n in getattr(klass, "__annotations__", {}))
    return hasattr(found, name) or name in declared


def _takes(found: Any, arguments: Tuple[str, ...]) -> bool:
    """``found`` can be called with ``arguments`` as positional arguments (assumed when it has no signature)."""
    try:
        inspect.signature(found).bind(*arguments)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin)
        pass
    return True


def _doc_line(code: Any) -> str:
    """The first line of ``code``'s docstring: an option's doc in a table of functions."""
    return (inspect.getdoc(code) or "").partition("\n")[0].strip().rstrip(".")


def _annotated(code: Any, parameter: str, base: str) -> Any:
    """The annotation of ``code``'s argument ``parameter`` (``base``, resolved, when it has none); a class's
    arguments are its ``__init__``'s."""
    try:
        hints = typing.get_type_hints(code.__init__ if isinstance(code, type) else code)
    except Exception:  # an annotation that does not resolve reads as none
        hints = {}
    return hints.get(parameter) or resolve(base)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if isinstance(err, (ImportError, AttributeError)) else f"{type(err).__name__}: {text}"


@dataclass(frozen=True)
class Axis:
    """The values one config field accepts, each with its meaning and the code that acts on it.

    field:   the dotted config field, ``loss.name``.
    options: name -> ``Option``; or ``module:attribute`` of a table name -> function in the module of the code
             (``rlscale.rl.losses:LOSSES``), read when the names are first needed: each function is the option's
             factory and its docstring's first line the option's doc, so an option is added in its own module.
    group:   the config group whose files select a value (each file of ``conf/<group>/`` sets
             ``field`` to one of ``options``, and every option is set by one file at least); None when
             the field is set directly.
    presets: the group's files are presets with names of their own (``model=smollm2`` sets
             ``model.name=hf``); otherwise each file is named by the option it selects (``loss=dapo``).
    plugin:  what a value ``module:attribute`` must name; None: the axis takes its names only.
    config:  ``(parameter, base)`` for an axis whose options have config classes of their own: the config class of
             a name is the one its ``Option.config`` names, else the annotation of its factory's ``parameter`` (a
             plug-in's too, the base when it has none), a subclass of ``base`` (``module:attribute``); the
             section holding ``field`` is typed by it (``config_class``). None: the section has one type for
             every option (``rlscale.config.schema``).
    """

    field: str
    options: Union[Mapping[str, Option], str]
    group: Optional[str] = None
    presets: bool = False
    plugin: Optional[PlugIn] = None
    config: Optional[Tuple[str, str]] = None

    @cached_property
    def choices(self) -> Mapping[str, Option]:
        """name -> ``Option``, the table of ``options`` read when it names one."""
        if not isinstance(self.options, str):
            return self.options
        module = self.options.partition(":")[0]
        return MappingProxyType({name: Option(_doc_line(code), f"{module}:{code.__qualname__}")
                                 for name, code in resolve(self.options).items()})

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self.choices)

    @property
    def section(self) -> str:
        """The config section holding ``field``: ``loss``."""
        return self.field.rpartition(".")[0]

    def problem(self, value: Any) -> Optional[str]:
        """The one-line complaint about ``value``, None when it is one of the names or a plug-in that imports
        and provides the axis's interface."""
        if value in self.choices:
            return None
        path = self._plugin_path(value)
        if path is None:
            return f"field '{self.field}': '{value}' is not one of {', '.join(self.names)}"
        try:
            found = resolve(path)
        except Exception as err:  # importing the user's module runs its code, which may raise anything
            return f"field '{self.field}': '{value}' cannot be imported ({_one_line(err)})"
        why = self.plugin.problem(found) or self._config_problem(found)
        if why:
            protocol = self.plugin.protocol
            return f"field '{self.field}': '{value}' is not a {protocol.rpartition(':')[2]} ({protocol}): {why}"
        return None

    def check(self, value: Any) -> None:
        """Raise ValueError with ``problem``'s line unless ``value`` is usable."""
        problem = self.problem(value)
        if problem:
            raise ValueError(problem)

    def load(self, value: Any) -> Any:
        """The code that acts on ``value``: its option's factory, or the plug-in it names, imported now;
        ValueError with ``problem``'s line for a value the axis does not take."""
        self.check(value)
        if value not in self.choices:
            return resolve(self._plugin_path(value))
        if isinstance(self.options, str):  # a table of the code's module
            return resolve(self.options)[value]
        factory = self.choices[value].factory
        if factory is None:
            raise TypeError(f"{self.field}: no code is registered for '{value}'")
        return resolve(factory)

    def _plugin_path(self, value: Any) -> Optional[str]:
        """The ``module:attribute`` a plug-in value names (itself, or an installed plug-in's name), None when the
        value names no plug-in."""
        if self.plugin is None or not isinstance(value, str):
            return None
        return value if ":" in value else self.plugin.installed().get(value)

    def config_class(self, value: Any) -> type:
        """The config class of ``value`` (``config``); ValueError with ``problem``'s line for a value the axis
        does not take."""
        if self.config is None:
            raise TypeError(f"{self.field}: the options of this axis share one config type")
        self.check(value)
        named = self.choices[value].config if value in self.choices else None
        return resolve(named) if named else _annotated(self.load(value), *self.config)

    def _config_problem(self, found: Any) -> Optional[str]:
        """Why a plug-in's config class is not a subclass of the axis's base, None when it is (or the axis has
        no config classes)."""
        if self.config is None:
            return None
        parameter, base = self.config
        klass = _annotated(found, parameter, base)
        if not (isinstance(klass, type) and dataclasses.is_dataclass(klass) and issubclass(klass, resolve(base))):
            return (f"the annotation of its '{parameter}' argument, {getattr(klass, '__name__', klass)}, is not a "
                    f"dataclass subclassing {base}")
        return None

    def table(self, values: Mapping[str, T]) -> Mapping[str, T]:
        """``values`` (data per name, such as the field holding each off-policy mode's k), read-only, once it is
        checked to cover exactly these names, so a name added without its value (or the reverse) fails at
        import."""
        if set(values) != set(self.choices):
            raise TypeError(f"{self.field}: the values {sorted(values)} are not the names {sorted(self.choices)}")
        return MappingProxyType(dict(values))
