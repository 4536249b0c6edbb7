"""kill -9 at seeded random writes of a run, one after the other: the same ``rlscale run`` command, killed at
its K-th write (a metrics or samples line, before it, half-written or after it; an atomic write, its temporary
file whole but not renamed or after the rename; status.json, checkpoints, config.yaml, the run's records), is
run again with the next kill point until it is left to finish; the run then holds exactly the results of an
uninterrupted run (metrics lines but their timings, samples byte for byte). Each resume that cuts the lines
written after the checkpoint says how many it removed. After each kill, ``rlscale status``
reads the run failed (its process gone), never ``running``, and every whole line of metrics.jsonl parses. A
checkpoint copied in from another run of the same config (the uninterrupted one) is refused in one line with
nothing changed.

The points come from ``random.Random(RLSCALE_FAULT_SEED)`` (default below): a failure names its seed and points,
and ``RLSCALE_FAULT_SEED=N pytest tests/faults/test_kill_points.py`` replays or explores others.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.runfolder.lock import LOCK_FILE
from rlscale.runfolder.metrics import read_metrics
from rlscale.runfolder.names import LOG_FILE
from rlscale.train.checkpoint import read_seal
from tests.faults.runs import TINY, assert_same_results, rlscale, state_of

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("RLSCALE_FAULT_SEED", "20261202"))
KILLS = 4
STEPS = 4
PHASES = ("before", "middle", "after")


def run_args(root: Path, cache: Path) -> list:
    return [f"out={root / 'run'}", f"cache_dir={cache}", *TINY, f"trainer.max_steps={STEPS}"]


def files(folder: Path) -> dict:
    """Every file's bytes, but the lock's (each taker writes its record there) and train.log's (the log says
    what was refused)."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and p.name not in (LOCK_FILE, LOG_FILE)}


def check_killed(run_dir: Path, where: str) -> None:
    """What a kill leaves: status.json whole, shown failed (process gone) when it said running; the whole
    lines of metrics.jsonl readable (a torn last line is skipped, and said so)."""
    if (run_dir / "status.json").exists() and state_of(run_dir)["state"] == "running":
        shown = CliRunner().invoke(app, ["status", str(run_dir.parent)], env={"COLUMNS": "250"})
        assert "failed" in shown.output and "gone" in shown.output and "running" not in shown.output, where
    if (run_dir / "metrics.jsonl").exists():
        _, warnings = read_metrics(run_dir / "metrics.jsonl")
        assert all("torn" in w or "partial" in w or "incomplete" in w for w in warnings), (where, warnings)


def check_copied_checkpoint_refused(run_dir: Path, reference: Path, where: str) -> None:
    """The uninterrupted run's checkpoint, copied in: refused in one line (beside the warning that the killed
    process's lock is taken over), nothing changed; then put back."""
    checkpoint = run_dir / "checkpoints" / "last.pt"
    own = checkpoint.read_bytes() if checkpoint.exists() else None
    checkpoint.parent.mkdir(exist_ok=True)
    shutil.copy(reference / "checkpoints" / "last.pt", checkpoint)
    before = files(run_dir)
    refused = rlscale("run", f"out={run_dir}", *run_args(run_dir.parent, reference.parent.parent / "cache")[1:])
    lines = [line for line in (refused.stdout + refused.stderr).splitlines() if "lock WARNING" not in line]
    assert refused.returncode == 1 and len(lines) == 1 and "Traceback" not in refused.stderr, (where, lines)
    assert lines[0].startswith(f"error: {checkpoint} (step {STEPS}) belongs to another history of this run"), lines
    assert files(run_dir) == before, where
    if own is None:
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(own)


def lines_past_checkpoint(run_dir: Path) -> tuple:
    """The whole lines of metrics.jsonl after the size its checkpoint recorded, and whether a torn one
    follows them: what the next resume cuts (0, False without a checkpoint)."""
    checkpoint = run_dir / "checkpoints" / "last.pt"
    if not checkpoint.exists():
        return 0, False
    size = next(log.size for log in read_seal(checkpoint).history if log.name == "metrics.jsonl")
    beyond = (run_dir / "metrics.jsonl").read_bytes()[size:]
    return beyond.count(b"\n"), not beyond.endswith(b"\n") and beyond != b""


def check_removal_said(process, past: tuple, finished: bool, where: str) -> None:
    """A resume that cut lines said how many (a torn last line may count as one); one that ran through
    past its restore and cut none said nothing."""
    said = re.findall(r"removed the (\d+) line\(s\) of metrics.jsonl", process.stderr)
    whole, torn = past
    if said:
        assert int(said[0]) in (whole, whole + torn) and whole + torn > 0, (where, said, past)
    elif finished:
        assert whole == 0, (where, past, process.stderr[-2000:])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple:
    """The uninterrupted run, and how many writes it made."""
    root = tmp_path_factory.mktemp("kill")
    count = root / "writes"
    done = rlscale("run", *run_args(root / "reference", root / "cache"),
                   fault={"at": "write", "call": 0, "phase": "before", "signal": "SIGKILL", "count": str(count)})
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "reference" / "run", int(count.read_text())


def test_kill_9_at_random_writes_then_the_same_command_ends_as_an_uninterrupted_run(reference, tmp_path):
    ref_dir, writes = reference
    rng = random.Random(SEED)
    # each process is killed within the first half of a run's writes: a resumed one writes less than a whole run
    points = [(rng.randint(1, writes // 2), rng.choice(PHASES)) for _ in range(KILLS)]
    where = f"RLSCALE_FAULT_SEED={SEED}, kill points {points} of {writes} writes"
    args = run_args(tmp_path, ref_dir.parent.parent / "cache")
    run_dir = tmp_path / "run"
    kills = 0
    for call, phase in points:
        past = lines_past_checkpoint(run_dir)
        killed = rlscale("run", *args, fault={"at": "write", "call": call, "phase": phase, "signal": "SIGKILL"})
        check_removal_said(killed, past, killed.returncode == 0, where)
        if killed.returncode == 0:  # a resumed run writes less: this one ended before the point
            continue
        assert killed.returncode == -9, (where, killed.stdout + killed.stderr)
        kills += 1
        check_killed(run_dir, where)
        if kills == 1:
            check_copied_checkpoint_refused(run_dir, ref_dir, where)
    assert kills >= 2, where
    past = lines_past_checkpoint(run_dir)
    final = rlscale("run", *args)
    assert final.returncode == 0, (where, final.stdout + final.stderr)
    check_removal_said(final, past, True, where)
    assert state_of(run_dir)["state"] == "done", where
    assert_same_results(run_dir, ref_dir)
