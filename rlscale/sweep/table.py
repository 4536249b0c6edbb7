"""Rich tables: the sweep specs (``--list``), the variants of a sweep (``--dry-run``) and the live progress of its runs (``rlscale
sweep`` until done, ``rlscale status``)."""
from __future__ import annotations

import time
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from rlscale.runfolder.names import shown
from rlscale.sweep.eta import UNFINISHED, etas
from rlscale.sweep.status import RunProgress, by_sweep
from rlscale.sweep.resolve import ResolvedRun
from rlscale.tables import WrappingTable

STATE_STYLE = {"done": "green", "running": "cyan", "pending": "dim", "preempted": "yellow", "failed": "red",
               "diverged": "magenta", "lost": "red", "unknown": "red"}


def variants_table(title: str, runs: Sequence[ResolvedRun], base: str) -> Table:
    table = WrappingTable(title=title)
    for column in ("run", "variant", "axis", "seed", "config", "overrides", "run dir"):
        table.add_column(column, overflow="fold")
    for r in runs:
        name = f"{r.run.variant} (base)" if r.run.variant == base else r.run.variant
        table.add_row(*map(shown, (r.run.name, name, r.run.axis or "", str(r.cfg.seed), r.run.config,
                                   " ".join(r.run.overrides), str(r.run_dir))))
    return table


def specs_table() -> Table:
    """The sweep specs ``conf=NAME`` can take (``rlscale sweep --list``), first match of the search path."""
    from rlscale.sweep.spec import listed_specs

    table = WrappingTable(title="sweep specs (conf=NAME)")
    for column in ("name", "description", "file"):
        table.add_column(column, overflow="fold")
    for name, description, path in listed_specs():
        table.add_row(*map(shown, (name, description, str(path))))
    return table


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def overall_eta(rows: Sequence[RunProgress]) -> Optional[float]:
    """Seconds until every unfinished run is done: the longest of the sweeps' ETAs (rlscale.sweep.eta); None
    while one of them has measured too little (no update and later eval yet)."""
    groups = by_sweep(rows)
    if not groups or any(row.timing is None for row in rows if row.state in UNFINISHED):
        return None
    sweeps = [etas([rows[i].timing for i in members])[1] for members in groups.values()
              if any(rows[i].state in UNFINISHED for i in members)]
    return None if not sweeps or None in sweeps else max(sweeps)


def summary(rows: Sequence[RunProgress]) -> str:
    """``12 runs: 5 done, 2 running, 1 failed, 4 pending; ETA 3m10s`` (states in table order)."""
    counts = Counter(row.state for row in rows)
    order = [state for state in STATE_STYLE if counts[state]] + sorted(set(counts) - set(STATE_STYLE))
    eta = overall_eta(rows)
    return (f"{len(rows)} runs: " + ", ".join(f"{counts[state]} {state}" for state in order)
            + (f"; ETA {_duration(eta)}" if eta is not None else ""))


def progress_table(rows: Sequence[RunProgress], title: str = "rlscale runs",
                   max_rows: Optional[int] = None) -> Table:
    """The progress table; with more rows than ``max_rows`` (the terminal's height) a summary row comes
    first and the unfinished and failed runs are shown before the finished ones, up to ``max_rows``."""
    table = WrappingTable(title=title)
    for column in ("sweep", "run", "state", "step", "val reward", "ETA", "job", "reason"):
        table.add_column(column, overflow="fold")
    if max_rows is not None and len(rows) > max_rows:
        shown_rows = sorted(rows, key=lambda row: row.state == "done")[:max(1, max_rows - 1)]
        table.add_row("", f"{summary(rows)} ({len(rows) - len(shown_rows)} finished runs not shown)",
                      end_section=True)
        rows = shown_rows
    for row in rows:
        step = "" if row.step is None else f"{row.step}/{row.max_steps}" if row.max_steps else str(row.step)
        if warming_up(row):
            running = row.timing.running_s
            step = f"warming up ({_duration(running)})" if running is not None else "warming up"
        reward = "" if row.val_reward is None else f"{row.val_reward:.3f}"
        state = f"[{STATE_STYLE[row.state]}]{row.state}[/]" if row.state in STATE_STYLE else shown(row.state)
        reason = "" if row.state in ("done", "running") else row.reason
        table.add_row(shown(row.ref.sweep), shown(row.ref.run), state, step, reward, _duration(row.eta_s),
                      shown(row.ref.job or ""), shown(reason))
    return table


def watch(poll: Callable[[], List[RunProgress]], console: Console, interval_s: float = 2.0,
          title: str = "rlscale runs") -> List[RunProgress]:
    """Until every run is finished (or lost): on a terminal, redraw the progress table every
    ``interval_s`` (``progress_table`` with the terminal's height, the summary under it); otherwise print one line per change
    of a run's state (``state_line``), the summary with its ETA once the ETA is measured and after each change
    of state, and the summary at the end."""
    if not console.is_terminal:
        return _watch_lines(poll, console.file, interval_s)
    rows = poll()
    with Live(_live_table(rows, title, console), console=console, refresh_per_second=4, transient=False) as live:
        while not all(row.finished for row in rows):
            time.sleep(interval_s)
            rows = poll()
            live.update(_live_table(rows, title, console))
    return rows


def _live_table(rows: Sequence[RunProgress], title: str, console: Console) -> Table:
    """The progress table with the terminal's height; the summary (with the sweep's ETA) under it, unless its
    first row already holds it."""
    table = progress_table(rows, title, _rows_that_fit(console))
    if len(rows) <= _rows_that_fit(console):
        table.caption = summary(rows)
    return table


def _rows_that_fit(console: Console) -> int:
    return max(1, console.height - 8)  # the title, header, rules and the sweep's own lines


def warming_up(row: RunProgress) -> bool:
    """Running, and no update yet: loading the model, compiling, the step-0 eval."""
    return row.state == "running" and row.timing is not None and row.timing.times.update_s is None


def state_line(row: RunProgress) -> str:
    """``loo/scalerl: done (step 60/60, val reward 0.571)``, or the reason of a failure."""
    details = []
    if row.step is not None:
        details.append(f"step {row.step}/{row.max_steps}" if row.max_steps else f"step {row.step}")
    if row.val_reward is not None:
        details.append(f"val reward {row.val_reward:.3f}")
    if row.reason and row.state not in ("done", "running"):
        details.append(row.reason)
    return shown(f"{row.ref.sweep}/{row.ref.run}: {row.state}" + (f" ({', '.join(details)})" if details else ""))


def _watch_lines(poll: Callable[[], List[RunProgress]], out: TextIO, interval_s: float) -> List[RunProgress]:
    seen: Dict[str, str] = {}
    timed = False
    while True:
        rows = poll()
        changed = [row for row in rows if seen.get(str(row.ref.run_dir)) != row.state]
        for row in changed:
            seen[str(row.ref.run_dir)] = row.state
            out.write(state_line(row) + "\n")
        known = overall_eta(rows) is not None
        if known and (changed or not timed) and not all(row.finished for row in rows):
            out.write(summary(rows) + "\n")  # the ETA once it is measured, then at each change of state
        timed = timed or known
        out.flush()
        if all(row.finished for row in rows):
            out.write(summary(rows) + "\n")
            out.flush()
            return rows
        time.sleep(interval_s)
