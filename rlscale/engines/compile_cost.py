"""Compilation cost, kept apart from the training compute of the scaling curve.

The x axis of Eq. 1 is the compute spent training (Section 2: GPU-hours of generation and updates). On a
GPU the first batch of a shape pays for torch.compile (Dynamo tracing, Inductor's code generation, the
lazily compiled backward) and for CUDA-graph capture: tens of seconds once, against steps of a fraction of a
second. That is a fixed cost of starting a process, not of training, so it is measured here and subtracted
from the compute meter (``rlscale.train.compute``), and logged as ``compile_s`` per step and ``startup_s``
per start of a run.

``STALLS`` is the process's clock. Dynamo reports the start and end of every compilation through
``torch._dynamo.callback`` (new frames, lazy backward compiles; nested ones are reported once); the
generator brackets its graph captures with ``STALLS.stall()``; a PipelineRL trainer adds the part of its
wait that its generators spent compiling (``add``). Overlapping spans count once.

``use_persistent_cache`` points Inductor's and Triton's on-disk caches into the run's ``cache_dir``, so a
second process that compiles the same graphs (the next run of a sweep, a resumed run, a PipelineRL
generator) loads the generated kernels instead of building them again.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CACHE_VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


class StallClock:
    """Wall seconds this process spent compiling or capturing graphs (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._since = 0.0
        self._total = 0.0
        self._hooked = False

    @property
    def seconds(self) -> float:
        """Stalled seconds so far, a span still open included."""
        with self._lock:
            return self._total + (time.perf_counter() - self._since if self._depth else 0.0)

    def begin(self, *_args) -> None:
        with self._lock:
            if self._depth == 0:
                self._since = time.perf_counter()
            self._depth += 1

    def end(self, *_args) -> None:
        with self._lock:
            if self._depth == 0:
                return
            self._depth -= 1
            if self._depth == 0:
                self._total += time.perf_counter() - self._since

    def add(self, seconds: float) -> None:
        """Count ``seconds`` stalled elsewhere (a generator process compiling while this one waited)."""
        with self._lock:
            self._total += max(0.0, seconds)

    @contextmanager
    def stall(self) -> Iterator[None]:
        self.begin()
        try:
            yield
        finally:
            self.end()

    def hook_compiler(self) -> None:
        """Follow torch.compile's compilations (idempotent)."""
        if self._hooked:
            return
        from torch._dynamo.callback import callback_handler

        callback_handler.register_start_callback(self.begin)
        callback_handler.register_end_callback(self.end)
        self._hooked = True


STALLS = StallClock()


def use_persistent_cache(cache_dir: str | Path) -> Path:
    """Keep Inductor's and Triton's compiled artifacts under ``cache_dir/compile`` (variables already set
    by the user win). Child processes inherit the setting. Returns the folder."""
    root = Path(cache_dir).expanduser() / "compile"
    for variable, sub in CACHE_VARIABLES.items():
        if not os.environ.get(variable):
            os.environ[variable] = str(root / sub)
    return root
