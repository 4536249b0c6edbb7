"""The peak of torch's CPU allocations during a call, for tests and benchmarks of memory on CPU (where torch has
no ``max_memory_allocated``): read from the memory events of ``torch.profiler`` (every allocation and free of
the CPU allocator, in bytes), net of what was allocated before the call."""
from __future__ import annotations

from typing import Callable, Tuple, TypeVar

from torch.profiler import ProfilerActivity, profile

T = TypeVar("T")


def peak_cpu_bytes(call: Callable[[], T]) -> Tuple[T, int]:
    """``call()``'s result and the most bytes its CPU tensors (with those it freed or returned) held at once."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = call()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
                     and e.device_type().name == "CPU"), key=lambda e: e.start_ns())
    held = peak = 0
    for event in events:
        held += event.nbytes()
        peak = max(peak, held)
    return result, peak
