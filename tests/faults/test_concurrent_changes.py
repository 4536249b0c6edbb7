"""Changes raced against a live run: while ``rlscale run`` trains a folder, extending it (``--run-dir D
trainer.max_steps=N``) or starting it over (``--force``) is refused in one line naming the folder and the
process that holds it, its command with another step count in one line naming the folder; none changes
anything, and the live run goes on.

The live run is stopped (SIGSTOP) while the changes are tried, so its files hold still and "nothing changed" is
byte for byte; it is continued after and must still train."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.runfolder.lock import LOCK_FILE
from tests.faults.runs import TINY, environment, state_of
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def train_lines(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return path.read_text().count('"kind": "train"') if path.exists() else 0


def test_changes_raced_against_a_live_run_are_refused_and_change_nothing(tmp_path):
    run_dir = tmp_path / "run"
    args = [f"out={run_dir}", f"cache_dir={tmp_path / 'cache'}", *TINY, "trainer.max_steps=100000"]
    live = subprocess.Popen([sys.executable, "-m", "rlscale.cli", "run", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=environment())
    try:
        wait_for(lambda: (run_dir / "checkpoints" / "last.pt").exists() and train_lines(run_dir) >= 2,
                 "the live run's first checkpoints", timeout=300)
        assert state_of(run_dir)["state"] == "running"
        os.killpg(live.pid, signal.SIGSTOP)
        before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != LOCK_FILE}
        held = (1, ["in use", f"pid {live.pid}"])
        for change, (code, words) in (
                (["--run-dir", str(run_dir), "trainer.max_steps=14"], held),
                ([*args[:-1], "trainer.max_steps=200000"], (2, ["a run with a different config exists there"])),
                ([*args, "--force"], held)):
            result = CliRunner().invoke(app, ["run", *change], env={"COLUMNS": "250"})
            lines = result.output.strip().splitlines()
            assert result.exit_code == code and len(lines) == 1 and "Traceback" not in result.output, (change, lines)
            assert str(run_dir) in lines[0] and all(word in lines[0] for word in words), lines
            after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != LOCK_FILE}
            assert after == before, change
        assert "max_steps: 100000\n" in (run_dir / "config.yaml").read_text()
        reached = train_lines(run_dir)
        os.killpg(live.pid, signal.SIGCONT)
        wait_for(lambda: train_lines(run_dir) > reached + 1, "the live run to go on", timeout=120)
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait()
