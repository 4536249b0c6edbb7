#!/usr/bin/env python
"""How far a reader follows ``rlscale run``'s overrides before reaching the code that uses them.

Runs ``rlscale run out=<temporary folder> trainer.max_steps=1 [OVERRIDE ...]`` in this process (the embedded
default: the tiny Llama on chain_sum) until the training loop's first update (``RunLoop.update`` in
``rlscale/train/loop.py``) returns, and prints two measures:

1. **Per knob** (the reader's path): every read of a config field by rlscale code is recorded (attribute reads
   on the schema's dataclasses, ``rlscale/config/schema.py``, and key reads on OmegaConf ``DictConfig`` nodes).
   A knob's path is the set of files a reader opens to follow it from the command line to where it acts: each
   file that reads it, and each file on the call stack of such a read whose function holds a config object
   among its arguments (the hand-off). Reads made by library code (OmegaConf's conversions, ``dataclasses``,
   the run's identity hash over the whole config) are not a reader's path and are not counted. Prints the
   median and largest path over the knobs read, then the knobs with the longest paths.
2. **Files handed a config object**: every rlscale file with a function that received a config object (an
   OmegaConf ``DictConfig``; a dataclass of ``rlscale/config/schema.py``; a settings object built from one: a
   dataclass of rlscale whose class name ends in ``Settings`` or ``Spec``, or with a field holding a config
   object), with the first such function.

3. **Files run on the way to the loop**: every rlscale file whose code runs between the command line and the
   call of the loop's ``train()`` (``rlscale/train/loop.py``), module bodies left out: with class bodies (the
   classes defined while the loop's imports load) and with functions alone. The first is how the count of 33
   files at 8fd51d5 was made.
4. **Entries per file**: how many of a file's functions received a config object until the first update
   returned, for the files entered by the most functions (``train/components.py``: 7 at 8fd51d5).

Closures' free variables do not count as arguments. Files under ``rlscale/cli`` (the command line) are left out.
Generator processes (PipelineRL, Sec. 3.1) run outside this process and are not followed.

Usage: ``python scripts/config-path.py [OVERRIDE ...]`` with the checkout to measure first on ``PYTHONPATH``.
The warmed-up tiny model is taken from (or written to) the configured ``cache_dir``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, Optional, Tuple

from omegaconf import DictConfig

import rlscale

ROOT = Path(rlscale.__file__).resolve().parent
LEFT_OUT = ("cli", "cli.py")
SETTINGS_SUFFIXES = ("Settings", "Spec")
SCHEMA_MODULE = "rlscale.config.schema"
TOP_KNOBS = 10  # knobs listed with their paths
TOP_ENTERED = 3  # files listed with their entries


def is_config(value) -> bool:
    """Whether ``value`` is a config object (module docstring)."""
    if isinstance(value, DictConfig):
        return True
    cls = type(value)
    if not dataclasses.is_dataclass(cls):
        return False
    module = getattr(cls, "__module__", "")
    if module == SCHEMA_MODULE:
        return True
    if not module.startswith("rlscale."):
        return False
    if cls.__name__.endswith(SETTINGS_SUFFIXES):
        return True
    return any(is_config(getattr(value, f.name, None)) for f in dataclasses.fields(cls)
               if not isinstance(getattr(value, f.name, None), type))


def rlscale_file(code) -> Optional[str]:
    """``rlscale/<path>`` of a code object of rlscale outside the command line, else None."""
    try:
        rel = Path(code.co_filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return None if rel.parts[0] in LEFT_OUT else f"rlscale/{rel.as_posix()}"


def config_argument(frame) -> Optional[Tuple[str, object]]:
    """The first argument (``self`` included) of the frame's function that is a config object, with its value."""
    code = frame.f_code
    named = code.co_argcount + code.co_kwonlyargcount
    packed = bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    names = code.co_varnames[:named]
    for name in names + code.co_varnames[named:named + packed]:
        value = frame.f_locals.get(name)
        values = (value,) if name in names else value.values() if isinstance(value, dict) else value or ()
        for item in values:
            if is_config(item):
                return name, item
    return None


class KnobReads:
    """Measure 1: each knob's path (module docstring), from reads recorded while ``active``."""

    def __init__(self) -> None:
        self.paths: Dict[str, set] = {}
        self.active = True
        self._inside = False

    def read(self, knob: str, frame) -> None:
        if not self.active or self._inside:
            return
        self._inside = True
        try:
            reader = rlscale_file(frame.f_code)
            if reader is None or reader == "rlscale/config/schema.py":
                return
            path = self.paths.setdefault(knob, set())
            path.add(reader)
            while frame is not None:
                file = rlscale_file(frame.f_code)
                if file is not None and file not in path and config_argument(frame):
                    path.add(file)
                frame = frame.f_back
        finally:
            self._inside = False

    def install(self) -> None:
        """Record field reads of the schema's dataclasses and key reads of ``DictConfig`` nodes."""
        from omegaconf import DictConfig as Node
        from rlscale.config import schema

        sections = {f.type if isinstance(f.type, type) else getattr(schema, f.type, None): f.name
                    for f in dataclasses.fields(schema.RunConfig)}
        for cls in vars(schema).values():
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == SCHEMA_MODULE:
                self._watch_dataclass(cls, sections.get(cls, ""))
        reads = self

        def key_read(method):
            def wrapper(node, key, *args):
                value = method(node, key, *args)
                if reads.active and not reads._inside and isinstance(key, str) and not isinstance(value, Node):
                    reads._inside = True
                    try:
                        full = node._get_full_key(key)
                    finally:
                        reads._inside = False
                    reads.read(str(full), sys._getframe(1))
                return value
            return wrapper

        for name in ("__getattr__", "__getitem__", "get"):
            setattr(Node, name, key_read(getattr(Node, name)))

    def _watch_dataclass(self, cls, section: str) -> None:
        names = {f.name for f in dataclasses.fields(cls)}
        reads = self
        prefix = f"{section}." if section else ""

        def getattribute(obj, name):
            value = object.__getattribute__(obj, name)
            if name in names and reads.active and not dataclasses.is_dataclass(value):
                reads.read(prefix + name, sys._getframe(1))
            return value

        cls.__getattribute__ = getattribute

    def summary(self) -> Tuple[int, float, int]:
        """(knobs read, median path length, longest path length)."""
        lengths = sorted(len(path) for path in self.paths.values())
        mid = len(lengths) // 2
        median = lengths[mid] if len(lengths) % 2 else (lengths[mid - 1] + lengths[mid]) / 2
        return len(lengths), median, lengths[-1]


class ConfigPath:
    """The profile hook: measure 2 (files whose functions received a config object), until the first update
    returns; measure 1's reads are recorded until then; measure 3's files until the loop's ``train()`` is
    called."""

    def __init__(self) -> None:
        # relative path -> each of its functions that received a config object, in the order they did, with the
        # first such argument: the first is measure 2's, their number measure 4's
        self.files: Dict[str, Dict[object, str]] = {}
        self.code: Dict[object, Optional[str]] = {}
        self.done = False
        self.knobs = KnobReads()
        self.before_loop: Dict[str, bool] = {}  # file run before the loop -> whether a function of it ran
        self.at_loop = False

    def __call__(self, frame, event, arg):
        if self.done or event not in ("call", "return"):
            return
        code = frame.f_code
        if code not in self.code:
            self.code[code] = rlscale_file(code)
        path = self.code[code]
        if path is None:
            return
        if event == "return":
            if code.co_name == "update" and path == "rlscale/train/loop.py":
                self.done = True
                self.knobs.active = False
            return
        if not self.at_loop:
            self.at_loop = code.co_name == "train" and path == "rlscale/train/loop.py"
            if not self.at_loop and code.co_name != "<module>":
                function = bool(code.co_flags & inspect.CO_NEWLOCALS)  # a class body has no locals of its own
                self.before_loop[path] = self.before_loop.get(path, False) or function
        found = config_argument(frame) if code.co_name != "<module>" else None
        if found is None:
            return
        functions = self.files.setdefault(path, {})
        if code not in functions:
            name, value = found
            functions[code] = f"{getattr(code, 'co_qualname', code.co_name)}({name}: {type(value).__name__})"


def main(overrides) -> int:
    from rlscale.cli import app

    hook = ConfigPath()
    hook.knobs.install()
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", f"out={Path(tmp) / 'run'}", "trainer.max_steps=1", *overrides]
        threading.setprofile(hook)
        sys.setprofile(hook)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the run's own lines; stdout is the count and the files
                app(args, standalone_mode=False)
        except SystemExit:
            pass
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    if not hook.done:
        print("error: the run ended before its first update", file=sys.stderr)
        return 1
    knobs, median, longest = hook.knobs.summary()
    print(f"knobs read: {knobs}; a knob's path: median {median:g} files, longest {longest}")
    ranked = sorted(hook.knobs.paths.items(), key=lambda item: (-len(item[1]), item[0]))
    for knob, path in ranked[:TOP_KNOBS]:
        print(f"  {knob}: {len(path)} files: {', '.join(sorted(path))}")
    print(f"files handed a config object: {len(hook.files)}")
    for path in sorted(hook.files):
        print(f"  {path}  {next(iter(hook.files[path].values()))}")
    functions = sorted(path for path, function in hook.before_loop.items() if function)
    print(f"files run on the way to the loop: {len(hook.before_loop)} with class bodies, {len(functions)} with "
          "functions alone")
    print(f"  functions: {', '.join(functions)}")
    entered = sorted(hook.files.items(), key=lambda item: (-len(item[1]), item[0]))[:TOP_ENTERED]
    print("files entered by the most functions with a config object: "
          + ", ".join(f"{path} {len(codes)}" for path, codes in entered))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
