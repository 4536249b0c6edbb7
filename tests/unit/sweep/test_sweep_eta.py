"""The sweep's ETAs from measured start-up, update and eval times (rlscale.sweep.eta): a lane pays the warm-up
once, every run its evals; a run still warming up counts the start-up it has left."""
from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from rlscale.runfolder.status import RunState, write_status
from rlscale.sweep.eta import EtaInput, Plan, RunTimes, etas, run_times
from rlscale.sweep.status import RunRef, collect

PLAN = Plan(max_steps=60, eval_every=6)
MEASURED = RunTimes(warmup_s=40.0, update_s=0.5, eval_s=2.0, timed=True)


def test_run_times_split_the_start_up_from_the_step_0_eval():
    records = [{"kind": "eval", "step": 0, "eval_s": 5.0},
               {"kind": "train", "step": 1, "step_seconds": 0.4, "startup_s": 46.0},
               {"kind": "train", "step": 2, "step_seconds": 0.6},
               {"kind": "eval", "step": 2, "eval_s": 1.5}, {"kind": "eval", "step": 4, "eval_s": 2.5}]
    assert run_times(records) == RunTimes(warmup_s=41.0, update_s=0.5, eval_s=2.0, timed=True)
    assert run_times([]) == RunTimes()
    slow_start = [{"kind": "train", "step": k, "step_seconds": 10.0 if k < 3 else 1.0} for k in range(1, 13)]
    assert run_times(slow_start).update_s == 1.0  # the last 10 updates: the machine's load of now


@pytest.mark.parametrize("plan,step,left", [(PLAN, 0, 10), (PLAN, 5, 10), (PLAN, 6, 9), (PLAN, 59, 1), (PLAN, 60, 0),
                                            (Plan(10, 4), 0, 3), (Plan(10, 4), 8, 1), (Plan(10, 4), 9, 1),
                                            (Plan(10, 4), 10, 0)])
def test_evals_left_count_every_interval_and_the_last_step(plan, step, left):
    assert plan.evals_after(step) == left


def test_two_lanes_pay_the_warm_up_once_and_every_eval():
    """Lane a: r0 at step 30 (its own 0.5 s an update, 2 s an eval), then r2. Lane b: r1 warming up for 10 s, then
    r3. The sweep's warm-up of a first run is r0's 40 s; a later run in a lane starts warm (0 s)."""
    runs = [EtaInput("a", "running", 30, PLAN, MEASURED), EtaInput("b", "running", None, PLAN, RunTimes(), 10.0),
            EtaInput("a", "pending", None, PLAN, RunTimes()), EtaInput("b", "pending", None, PLAN, RunTimes())]
    lefts, sweep = etas(runs)
    # r0: 30 updates x 0.5 + 5 evals x 2 = 25; r2: step-0 eval 2 + 60 x 0.5 + 10 x 2 = 52
    # r1: 40 + 2 + 30 + 20 = 92 less the 10 s it has run = 82; r3 = 52
    assert lefts == [25.0, 82.0, 52.0, 52.0]
    assert sweep == 134.0


def test_no_eta_until_an_update_and_a_later_eval_are_measured():
    only_updates = RunTimes(warmup_s=40.0, update_s=0.5, eval_s=None, timed=True)
    lefts, sweep = etas([EtaInput("a", "running", 3, PLAN, only_updates),
                         EtaInput("a", "pending", None, PLAN, RunTimes())])
    assert lefts == [None, None] and sweep is None


def test_lines_without_eval_s_count_their_evals_as_free():
    """Runs written before eval lines carried ``eval_s``: their ETA still counts the start-up."""
    old = RunTimes(warmup_s=40.0, update_s=0.5, eval_s=None, timed=False)
    lefts, sweep = etas([EtaInput("a", "running", 30, PLAN, old), EtaInput("a", "pending", None, PLAN, RunTimes())])
    assert lefts == [15.0, 30.0] and sweep == 45.0  # the lane's second run starts warm


def test_runs_on_jobs_of_their_own_share_the_work_among_those_running():
    runs = [EtaInput("j1", "running", 30, PLAN, MEASURED), EtaInput("j2", "running", 30, PLAN, MEASURED),
            EtaInput("j3", "pending", None, PLAN, RunTimes()), EtaInput("j4", "done", 60, PLAN, MEASURED)]
    lefts, sweep = etas(runs)
    assert lefts == [25.0, 25.0, 92.0, 0.0]  # a run on its own job is a first run: the 40 s warm-up
    assert sweep == pytest.approx((25 + 25 + 92) / 2)


def _run(folder, state, lines, **status):
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml({"trainer": {"max_steps": 60, "eval_every": 6}}))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_status(folder, state, **status)


def test_collect_gives_running_runs_their_time_left(tmp_path):
    """From run folders (outside any sweep.json: no job, so each run is a lane of its own): the running run's own
    rates; the pending run is a whole run, warm-up included, shared with the one run running."""
    lines = [{"kind": "eval", "step": 0, "eval_s": 4.0, "val_reward": 0.2},
             *({"kind": "train", "step": k, "step_seconds": 0.5, **({"startup_s": 44.0} if k == 1 else {})}
               for k in range(1, 31)),
             *({"kind": "eval", "step": k, "eval_s": 2.0, "val_reward": 0.3} for k in range(6, 31, 6))]
    _run(tmp_path / "a", RunState.RUNNING, lines)
    _run(tmp_path / "b", RunState.PENDING, [])
    refs = [(RunRef("sw", name, tmp_path / name), "local") for name in ("a", "b")]
    rows = collect(refs)
    assert rows[0].eta_s == 25.0 and rows[1].eta_s is None
    from rlscale.sweep.table import overall_eta, summary

    assert overall_eta(rows) == 25.0 + 92.0
    assert summary(rows) == "2 runs: 1 running, 1 pending; ETA 1m57s"
