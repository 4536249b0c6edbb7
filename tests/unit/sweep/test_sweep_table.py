"""The sweep's progress output: one line per state change when not on a terminal, a summary (counts by
state and an overall ETA computed from the running runs' rates) and a table that keeps the summary and the
unfinished runs when it has more rows than the terminal."""
from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from rlscale.runfolder.status import RunState, write_status
from rlscale.sweep.status import RunProgress, RunRef, collect, refs_under
from rlscale.sweep.table import overall_eta, progress_table, summary, watch


def row(run: str, state: str, step=None, eta=None, reward=None, reason="", alive=False) -> RunProgress:
    return RunProgress(ref=RunRef(sweep="loo", run=run, run_dir=Path("/r/loo") / run), state=state, reason=reason,
                       step=step, max_steps=10, val_reward=reward, eta_s=eta, job_alive=alive)


def test_summary_counts_states_and_shares_the_steps_left_among_running_runs():
    rows = [row("a", "done", 10), row("b", "running", 6, eta=8.0, alive=True),  # 2 s per step
            row("c", "running", 5, eta=20.0, alive=True),  # 4 s per step
            row("d", "pending", None), row("e", "failed", 3, reason="boom")]
    # steps left: 4 + 5 + 10 = 19 at a mean 3 s per step, over 2 running runs: 28.5 s
    assert overall_eta(rows) == 28.5
    assert summary(rows) == "5 runs: 1 done, 2 running, 1 pending, 1 failed; ETA 0m28s"
    assert overall_eta([row("a", "done", 10), row("d", "pending")]) is None


def test_an_overflowing_table_shows_the_summary_and_the_unfinished_runs_first():
    rows = [row(f"r{k}", "done", 10, reward=0.5) for k in range(6)] + [row("late", "running", 2, eta=16.0)]
    console = Console(file=io.StringIO(), width=200, height=50)
    console.print(progress_table(rows, "sweep loo", max_rows=3))
    text = console.file.getvalue()
    assert "7 runs: 6 done, 1 running; ETA 0m16s (5 finished runs not shown)" in text
    assert "late" in text and "r0" in text and "r2" not in text
    console = Console(file=io.StringIO(), width=200, height=50)
    console.print(progress_table(rows, "sweep loo", max_rows=10))
    assert "runs:" not in console.file.getvalue() and "r5" in console.file.getvalue()


def test_piped_watch_prints_one_line_per_state_change_then_the_summary():
    polls = iter([[row("a", "pending"), row("b", "pending")],
                  [row("a", "running", 1, alive=True), row("b", "pending")],
                  [row("a", "running", 5, alive=True), row("b", "pending")],
                  [row("a", "done", 10, reward=0.571), row("b", "failed", 0, reason="KeyError: x")]])
    out = io.StringIO()
    watch(lambda: next(polls), Console(file=out, force_terminal=False), interval_s=0)
    assert out.getvalue().splitlines() == [
        "loo/a: pending", "loo/b: pending", "loo/a: running (step 1/10)",
        "loo/a: done (step 10/10, val reward 0.571)", "loo/b: failed (step 0/10, KeyError: x)",
        "2 runs: 1 done, 1 failed"]


def test_status_lists_a_run_that_has_not_written_its_first_metrics_line(tmp_path):
    started, done = tmp_path / "solo_run", tmp_path / "other_run"
    started.mkdir()
    done.mkdir()
    write_status(started, RunState.RUNNING, pid=0)  # loading its model: no metrics.jsonl yet
    (done / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
    write_status(done, RunState.DONE)
    rows = {row.ref.run: row for row in collect(refs_under(tmp_path))}
    assert set(rows) == {"solo_run", "other_run"}
    assert rows["solo_run"].step is None and rows["other_run"].step == 1
