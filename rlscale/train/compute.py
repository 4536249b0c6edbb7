"""Compute accounting for the x axis of the scaling curve (Section 2: C in GPU-hours).

The measured unit is named for what it measures. On CUDA, ``gpu_hours`` = wall seconds of the training
work (generation + updates, evaluation excluded) x devices / 3600, less the seconds spent compiling and
capturing graphs (``rlscale.engines.compile_cost``: a fixed cost of starting a process, logged apart as
``compile_s``). On CPU, ``core_hours`` = CPU seconds of the process and its children (the PipelineRL
generator processes included) / 3600; a CPU run carries no ``gpu_hours`` (CPU runs do not compile). Both
are measured and move with machine load. ``flops`` is analytic (it depends on the tokens alone, so the
same seed gives the same value on any machine): 2 x params per processed token for generation (prefill +
decode), 6 x params per trained token, 2 x params per extra scoring forward (TIS or KL reference).
``samples`` and ``tokens`` (generated) are counts.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from rlscale.engines.compile_cost import STALLS


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class ComputeTotals:
    device_seconds: float = 0.0
    flops: float = 0.0
    samples: int = 0
    tokens: int = 0

    def as_metrics(self, device_type: str) -> dict:
        """The metrics-line fields: ``gpu_hours`` on CUDA, ``core_hours`` elsewhere, and the counts."""
        measured = "gpu_hours" if device_type == "cuda" else "core_hours"
        return {measured: self.device_seconds / 3600.0, "flops": self.flops, "samples": self.samples,
                "tokens": self.tokens}


class ComputeMeter:
    """Accumulates ComputeTotals; ``measure()`` brackets the work that counts as training compute."""

    def __init__(self, params: int, device_type: str, num_devices: int = 1):
        self.params = params
        self.device_type = device_type
        self.num_devices = num_devices
        self.totals = ComputeTotals()

    def measure(self) -> "_Span":
        return _Span(self)

    def add_generation(self, prompt_tokens: int, generated_tokens: int, samples: int) -> None:
        self.totals.flops += 2.0 * self.params * (prompt_tokens + generated_tokens)
        self.totals.samples += samples
        self.totals.tokens += generated_tokens

    def add_training(self, trained_tokens: int, extra_forwards: int = 0) -> None:
        self.totals.flops += (6.0 + 2.0 * extra_forwards) * self.params * trained_tokens

    def as_metrics(self) -> dict:
        return self.totals.as_metrics(self.device_type)

    def state_dict(self) -> dict:
        return asdict(self.totals)

    def load_state_dict(self, state: dict) -> None:
        self.totals = ComputeTotals(**state)


class _Span:
    def __init__(self, meter: ComputeMeter):
        self.meter = meter

    def __enter__(self):
        self.cpu0, self.wall0, self.stalled0 = cpu_seconds(), time.perf_counter(), STALLS.seconds
        return self

    def __exit__(self, *exc):
        if self.meter.device_type == "cuda":
            wall = time.perf_counter() - self.wall0 - (STALLS.seconds - self.stalled0)
            seconds = max(0.0, wall) * self.meter.num_devices
        else:
            seconds = cpu_seconds() - self.cpu0
        self.meter.totals.device_seconds += seconds
        return False
