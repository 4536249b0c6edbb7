"""Map a function over items in worker processes, one per usable core (a report of hundreds of runs is
read and drawn in parallel; matplotlib and JSON decoding hold the GIL, so threads would not help)."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, List, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def workers() -> int:
    """Usable cores (the affinity mask, not the machine's count); RLSCALE_REPORT_WORKERS overrides."""
    configured = os.environ.get("RLSCALE_REPORT_WORKERS")
    if configured:
        return max(1, int(configured))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def parallel_map(fn: Callable[[T], R], items: Sequence[T], n_workers: int) -> List[R]:
    """``[fn(item) for item in items]``, in order; in-process when one worker or one item suffices.
    ``fn`` must be a module-level function and items and results picklable."""
    if n_workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    n_workers = min(n_workers, len(items))
    with ProcessPoolExecutor(max_workers=n_workers) as pool:
        return list(pool.map(fn, items, chunksize=max(1, len(items) // (4 * n_workers))))
