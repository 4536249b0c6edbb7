#!/usr/bin/env python
"""How many rlscale source files a run's config crosses on its way from ``rlscale run``'s overrides to the
training loop's first update.

Runs ``rlscale run out=<temporary folder> trainer.max_steps=1 [OVERRIDE ...]`` in this process (the embedded
default: the tiny Llama on chain_sum) under ``sys.setprofile`` (and ``threading.setprofile``) and records every
rlscale function called, until the loop's first update (``RunLoop.update`` in ``rlscale/train/loop.py``)
returns, with a config object among its arguments (``self`` included). A config object is:

- an OmegaConf ``DictConfig``;
- an instance of a dataclass defined in ``rlscale/config/schema.py`` (``RunConfig`` and its sections);
- a settings object built from one: a dataclass defined in rlscale whose class name ends in ``Settings`` or
  ``Spec`` (``GeneratorSettings``, ``LearnerSettings``, ``LossSpec``), or that has a field holding a config
  object.

Closures' free variables do not count as arguments. Files under ``rlscale/cli`` (the command line) are left out.
Generator processes (PipelineRL, Sec. 3.1) run outside this process and are not followed. Prints the number of
files, then each file with the first function that received a config object in it.

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


class ConfigPath:
    """The profile hook: files whose functions received a config object, until the first update returns."""

    def __init__(self) -> None:
        self.files: Dict[str, str] = {}  # relative path -> first function that received a config object
        self.code: Dict[object, Optional[Tuple[str, Tuple[str, ...], Tuple[str, ...]]]] = {}
        self.done = False

    def _describe(self, code) -> Optional[Tuple[str, Tuple[str, ...], Tuple[str, ...]]]:
        """(relative file, argument names, names of ``*args`` and ``**kwargs``) of a code object of rlscale, None
        for any other."""
        try:
            rel = Path(code.co_filename).resolve().relative_to(ROOT)
        except ValueError:
            return None
        if rel.parts[0] in LEFT_OUT:
            return None
        named = code.co_argcount + code.co_kwonlyargcount
        packed = bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
        return f"rlscale/{rel.as_posix()}", code.co_varnames[:named], code.co_varnames[named:named + packed]

    def __call__(self, frame, event, arg):
        if self.done or event not in ("call", "return"):
            return
        code = frame.f_code
        if code not in self.code:
            self.code[code] = self._describe(code)
        known = self.code[code]
        if known is None:
            return
        path, names, packed = known
        if event == "return":
            if code.co_name == "update" and path == "rlscale/train/loop.py":
                self.done = True
            return
        if path in self.files:
            return
        local = frame.f_locals
        for name in names + packed:
            value = local.get(name)
            values = (value,) if name in names else value.values() if isinstance(value, dict) else value
            for item in values:
                if is_config(item):
                    function = getattr(code, "co_qualname", code.co_name)
                    self.files[path] = f"{function}({name}: {type(item).__name__})"
                    return


def main(overrides) -> int:
    from rlscale.cli import app

    hook = ConfigPath()
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
    print(len(hook.files))
    for path in sorted(hook.files):
        print(f"{path}  {hook.files[path]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
