"""The sweep's progress output: one line per state change when not on a terminal, a summary (counts by
state and an overall ETA computed from the running runs' rates) and a table that keeps the summary and the
unfinished runs when it has more rows than the terminal."""
from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from rlscale.runfolder.status import RunState, write_status
from rlscale.sweep.eta import EtaInput, Plan, RunTimes
from rlscale.sweep.status import RunProgress, RunRef, collect, refs_under
from rlscale.sweep.table import overall_eta, progress_table, summary, watch


def row(run: str, state: str, step=None, eta=None, reward=None, reason="", alive=False, times=RunTimes(),
        lane="lane") -> RunProgress:
    timing = EtaInput(lane=lane, state=state, step=step, plan=Plan(max_steps=10, eval_every=5), times=times)
    return RunProgress(ref=RunRef(sweep="loo", run=run, run_dir=Path("/r/loo") / run), state=state, reason=reason,
                       step=step, max_steps=10, val_reward=reward, eta_s=eta, job_alive=alive, timing=timing)


def test_summary_counts_states_and_gives_the_longest_lane():
    """Lane 1: b, its first run, at step 6 (1 s an update, 3 s an eval), then d; lane 2: c at step 5. b: 4
    updates + 1 eval = 7 s; d, a lane's later run: its step-0 eval, 10 updates and 2 evals = 19 s; c: 5 + 3 = 8 s."""
    times = RunTimes(warmup_s=20.0, update_s=1.0, eval_s=3.0, timed=True)
    rows = [row("a", "done", 10, lane="lane 0"), row("b", "running", 6, alive=True, times=times),
            row("c", "running", 5, alive=True, times=times, lane="lane 2"), row("d", "pending"),
            row("e", "failed", 3, reason="boom")]
    assert overall_eta(rows) == 26.0
    assert summary(rows) == "5 runs: 1 done, 2 running, 1 pending, 1 failed; ETA 0m26s"
    assert overall_eta([row("a", "done", 10), row("d", "pending")]) is None


def test_an_overflowing_table_shows_the_summary_and_the_unfinished_runs_first():
    times = RunTimes(warmup_s=20.0, update_s=1.0, eval_s=3.0, timed=True)  # 8 updates and 2 evals left: 14 s
    rows = [row(f"r{k}", "done", 10, reward=0.5) for k in range(6)] + [row("late", "running", 2, eta=14.0, times=times)]
    console = Console(file=io.StringIO(), width=200, height=50)
    console.print(progress_table(rows, "sweep loo", max_rows=3))
    text = console.file.getvalue()
    assert "7 runs: 6 done, 1 running; ETA 0m14s (5 finished runs not shown)" in text
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


def test_piped_watch_prints_the_eta_once_measured_and_at_each_change():
    """The summary with its ETA comes once the ETA is measured (no state changed then), again at the next change
    of state, and not at polls that change nothing."""
    times = RunTimes(warmup_s=20.0, update_s=1.0, eval_s=3.0, timed=True)
    polls = iter([[row("a", "running", None, alive=True), row("b", "pending")],
                  [row("a", "running", 6, alive=True, times=times), row("b", "pending")],
                  [row("a", "running", 7, alive=True, times=times), row("b", "pending")],
                  [row("a", "done", 10), row("b", "running", 2, alive=True, times=times)],
                  [row("a", "done", 10), row("b", "done", 10)]])
    out = io.StringIO()
    watch(lambda: next(polls), Console(file=out, force_terminal=False), interval_s=0)
    # a at step 6: 4 updates + 1 eval = 7 s, then b warm: its step-0 eval, 10 updates, 2 evals = 19 s
    assert out.getvalue().splitlines() == [
        "loo/a: running", "loo/b: pending", "2 runs: 1 running, 1 pending; ETA 0m26s",
        "loo/a: done (step 10/10)", "loo/b: running (step 2/10)", "2 runs: 1 done, 1 running; ETA 0m14s",
        "loo/b: done (step 10/10)", "2 runs: 2 done"]


def test_the_live_table_on_a_terminal_shows_the_sweeps_eta_under_it():
    times = RunTimes(warmup_s=20.0, update_s=1.0, eval_s=3.0, timed=True)
    polls = iter([[row("a", "running", 6, alive=True, times=times), row("b", "running", None, alive=True)],
                  [row("a", "done", 10), row("b", "done", 10)]])
    out = io.StringIO()
    watch(lambda: next(polls), Console(file=out, force_terminal=True, width=200, height=50), interval_s=0)
    text = out.getvalue()
    assert "2 runs: 2 running; ETA" in text and "warming up" in text and "2 runs: 2 done" in text
