"""The progress display of ``rlscale run``: on a terminal a rich progress bar (step of max_steps, latest
train and validation pass rates, ETA; "warming up" until the first update); otherwise (piped, nohup, a SLURM
log) a line as the run starts warming up, then one plain line every ``every_s`` seconds and at the last step, so
logs stay readable."""
from __future__ import annotations

import sys
import time
from typing import Callable, Dict, Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def _rewards(record: Dict, last: Dict[str, float]) -> str:
    """The train and validation figures on one scale: both pass rates (0-1); a train line without
    ``pass_rate`` shows its reward labelled with its scale (+-1, Section 2)."""
    if record.get("kind") == "eval" and isinstance(record.get("val_reward"), (int, float)):
        last["val"] = record["val_reward"]
    elif isinstance(record.get("pass_rate"), (int, float)):
        last.pop("reward", None)
        last["pass"] = record["pass_rate"]
    elif isinstance(record.get("reward"), (int, float)):
        last["reward"] = record["reward"]
    parts = [f"train pass {last['pass']:.3f}" if "pass" in last and "reward" not in last else "",
             f"train reward (+-1) {last['reward']:.3f}" if "reward" in last else "",
             f"val pass {last['val']:.3f}" if "val" in last else ""]
    return "  ".join(p for p in parts if p)


WARMING_UP = "warming up (loading the model, compiling, the step-0 eval)"


class ProgressBar:
    """A rich progress bar; ``write`` advances it to the record's step. Until the first update it says that the
    run is warming up. ``console``: where it draws, which the run's log handler shares (rlscale.train.logs)."""

    def __init__(self, title: str, max_steps: int, console: Optional[Console] = None):
        self.last: Dict[str, float] = {}
        self.console = console or Console(stderr=True)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rewards]}"), TimeElapsedColumn(),
                                 TextColumn("{task.fields[eta]}"), TimeRemainingColumn(), console=self.console,
                                 transient=False)
        self.task = self.progress.add_task(title, total=max_steps, rewards=WARMING_UP, eta="")
        self.progress.start()

    def write(self, record: Dict) -> None:
        rewards = _rewards(record, self.last)
        warming = "reward" not in self.last  # no train line yet
        self.progress.update(self.task, completed=int(record.get("step", 0)),
                             rewards=f"{WARMING_UP}  {rewards}".rstrip() if warming else rewards,
                             eta="" if warming else "ETA")

    def close(self) -> None:
        self.progress.stop()


class ProgressLines:
    """A plain line ``<title>: step S/N  reward R  val V  eta 1m05s`` at most every ``every_s`` seconds."""

    def __init__(self, title: str, max_steps: int, stream: Optional[TextIO] = None, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        """``stream``: where the lines go, by default the process's stderr when the display is made."""
        self.title, self.max_steps, self.every_s, self.clock = title, max_steps, every_s, clock
        self.stream = stream or sys.stderr
        self.last: Dict[str, float] = {}
        self.start = clock()
        self.printed_at: Optional[float] = None
        self.first_step: Optional[int] = None

    def started(self) -> None:
        """The run holds its folder and passed its checks: say it is warming up (a refusal prints its one line
        alone)."""
        self.stream.write(f"{self.title}: {WARMING_UP}\n")
        self.stream.flush()

    def write(self, record: Dict) -> None:
        step = int(record.get("step", 0))
        rewards = _rewards(record, self.last)
        now = self.clock()
        if self.first_step is None:
            self.first_step, self.start = step, now
        due = self.printed_at is None or now - self.printed_at >= self.every_s
        if not (due or (step >= self.max_steps and record.get("kind") == "eval")):
            return
        done = step - self.first_step
        eta = (now - self.start) / done * (self.max_steps - step) if done > 0 else None
        eta_text = "" if eta is None else f"  eta {int(eta) // 60}m{int(eta) % 60:02d}s"
        self.stream.write(f"{self.title}: step {step}/{self.max_steps}" + (f"  {rewards}" if rewards else "")
                          + eta_text + "\n")
        self.stream.flush()
        self.printed_at = now

    def close(self) -> None:
        pass


def run_progress(title: str, max_steps: int, terminal: Optional[bool] = None):
    """A ``ProgressBar`` on a terminal (stderr), else ``ProgressLines``."""
    terminal = sys.stderr.isatty() if terminal is None else terminal
    return ProgressBar(title, max_steps) if terminal else ProgressLines(title, max_steps)
