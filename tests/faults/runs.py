"""What the fault tests share: the tiny run they train, the process that runs ``rlscale`` with a fault
(``inject.py``), and the comparison of a run's results with an uninterrupted run's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

from rlscale.runfolder.metrics import MEASURED_FIELDS

INJECT = Path(__file__).with_name("inject.py")
REPO = Path(__file__).resolve().parents[2]
# 2 prompts x 2 generations per update, a 2-step warm-up, a checkpoint at every step
TINY = ["model.warmup_steps=2", "trainer.eval_every=2", "trainer.checkpoint_every=1", "task.val_size=4",
        "task.train_size=16", "trainer.eval_samples=1", "batch.prompts=2", "batch.generations=2", "offpolicy=ppo",
        "offpolicy.batches_per_version=1", "engine.threads=1"]


def rlscale(*args, fault: Optional[dict] = None, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """``rlscale ARGS`` in a process of its own; with ``fault``, through inject.py."""
    head = [sys.executable, str(INJECT), json.dumps(fault)] if fault else [sys.executable, "-m", "rlscale.cli"]
    return subprocess.run([*head, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=environment(), **kw)


def environment() -> dict:
    """This environment with the checkout first on PYTHONPATH (inject.py imports rlscale as a script)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def computed(run_dir: Path) -> List[dict]:
    """metrics.jsonl's lines less their timings."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in MEASURED_FIELDS} for line in lines]


def ends_at_line_end(path: Path) -> bool:
    """An append-only log holds whole lines only: absent, empty, or its last byte a newline."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    return data == b"" or data.endswith(b"\n")


def assert_same_results(run_dir: Path, reference: Path) -> None:
    """The run's metrics lines equal the uninterrupted run's but for timings, its samples byte for byte, and
    metrics.jsonl ends at a line end."""
    assert (Path(run_dir) / "metrics.jsonl").read_bytes().endswith(b"\n")
    assert computed(run_dir) == computed(reference)
    assert (Path(run_dir) / "samples.jsonl").read_bytes() == (Path(reference) / "samples.jsonl").read_bytes()


def state_of(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "status.json").read_text())
