"""Rich tables: the variants of a sweep (``--dry-run``) and the live progress of its runs (``rlscale
sweep`` until done, ``rlscale status``)."""
from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence

from rich.console import Console
from rich.live import Live
from rich.table import Table

from rlscale.results.names import shown
from rlscale.sweep.progress import RunProgress
from rlscale.sweep.resolve import ResolvedRun

STATE_STYLE = {"done": "green", "running": "cyan", "pending": "dim", "preempted": "yellow", "failed": "red",
               "diverged": "magenta", "lost": "red", "unknown": "red"}


def variants_table(title: str, runs: Sequence[ResolvedRun], base: str) -> Table:
    table = Table(title=title)
    for column in ("run", "variant", "axis", "seed", "config", "overrides", "run dir"):
        table.add_column(column, overflow="fold")
    for r in runs:
        name = f"{r.run.variant} (base)" if r.run.variant == base else r.run.variant
        table.add_row(*map(shown, (r.run.name, name, r.run.axis or "", str(r.cfg.seed), r.run.config,
                                   " ".join(r.run.overrides), str(r.run_dir))))
    return table


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_table(rows: Sequence[RunProgress], title: str = "rlscale runs") -> Table:
    table = Table(title=title)
    for column in ("sweep", "run", "state", "step", "val reward", "ETA", "job", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        step = "" if row.step is None else f"{row.step}/{row.max_steps}" if row.max_steps else str(row.step)
        reward = "" if row.val_reward is None else f"{row.val_reward:.3f}"
        state = f"[{STATE_STYLE[row.state]}]{row.state}[/]" if row.state in STATE_STYLE else shown(row.state)
        reason = "" if row.state in ("done", "running") else row.reason
        table.add_row(shown(row.ref.sweep), shown(row.ref.run), state, step, reward, _duration(row.eta_s),
                      shown(row.ref.job or ""), shown(reason))
    return table


def watch(poll: Callable[[], List[RunProgress]], console: Console, interval_s: float = 2.0,
          title: str = "rlscale runs") -> List[RunProgress]:
    """Redraw the progress table every ``interval_s`` until every run is finished (or lost)."""
    rows = poll()
    with Live(progress_table(rows, title), console=console, refresh_per_second=4, transient=False) as live:
        while not all(row.finished for row in rows):
            time.sleep(interval_s)
            rows = poll()
            live.update(progress_table(rows, title))
    return rows
