"""PipelineRL's generators as tasks of the run's job (``launcher.generator_tasks``): a 2-task job whose second
task is the generator, launched by ``rlscale sweep``, trains like one process whose generator is a process of its
own. The weights reach the generator task over the network (a Gloo broadcast from rank 0 on CPU), the chunks
through rank 0's TCP store, and scheduled in-flight updates make which version samples which token independent
of timing, so everything sampled is equal and the learner's numbers are too (one trainer in both: the same
sums in the same order).

- local executor: equality with the one-process run, the job shape in every metrics line;
- a killed generator task fails the run with one line and ends the job; rank 0 killed ends it too, and the
  sweep rerun restarts both tasks, which resume from rank 0's checkpoint to the uninterrupted result;
- real SLURM (localhost): the generated sbatch script (``srun``, 2 tasks) to the same result.

A job's tasks on one machine stand in for tasks on several nodes: the generator task reaches rank 0 through
``MASTER_ADDR`` as it would from another node (real SLURM here has one node).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.test_multi_rank_jobs import (JOB_END_S, OVERRIDES, gone, lines, run_dir_of, start_detached,
                                                    status, sweep, train_steps, write_spec)
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

STEPS = 8
PIPELINE = [o for o in OVERRIDES if not o.startswith(("offpolicy=", "engine.learner="))] + [
    "offpolicy=pipeline", "offpolicy.update_every_tokens=16"]
WITH_TASK = ["launcher.generator_tasks=1"]
SAMPLED = ("reward", "pass_rate", "samples", "tokens", "flops", "response_tokens_mean", "kept_prompt_fraction",
           "lag_mean", "lag_max")
LEARNED = ("loss", "grad_norm", "entropy", "clip_fraction", "ratio_mean", "lr")
SLURM = ["launcher=slurm", "launcher.mem_gb=4", "launcher.timeout_min=30"]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> Path:
    """The reference: one process whose generator is a process of its own (``offpolicy.num_generators=1``)."""
    folder = tmp_path_factory.mktemp("one")
    done = sweep(folder, write_spec(folder, "one", 1, overrides=PIPELINE))
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir_of(folder, "one")


def assert_same_training(reference: Path, run: Path) -> None:
    """Equal train and eval lines (the learner's numbers to 1e-6 relative), the job shape in every line of the
    run, and a publication to the generator task after every update."""
    expected, got = lines(reference), lines(run)
    assert [(r["kind"], r["step"]) for r in got] == [(r["kind"], r["step"]) for r in expected]
    for exp, act in zip(expected, got):
        assert (act["nodes"], act["tasks_per_node"], act["generator_tasks"]) == (1, 1, 1)
        if exp["kind"] == "eval":
            assert act["val_reward"] == exp["val_reward"], exp["step"]
            continue
        assert act["weight_sync_s"] > 0
        for key in SAMPLED:
            assert act[key] == exp[key], (exp["step"], key)
        for key in LEARNED:
            assert act[key] == pytest.approx(exp[key], rel=1e-6, abs=1e-9), (exp["step"], key)


def test_a_job_with_a_generator_task_trains_like_one_process(one_process, tmp_path):
    start = time.monotonic()
    done = sweep(tmp_path, write_spec(tmp_path, "task", 2, WITH_TASK, overrides=PIPELINE))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = run_dir_of(tmp_path, "task")
    assert status(run_dir)["state"] == "done"
    assert_same_training(one_process, run_dir)
    assert not list(run_dir.glob("generator-task-*.log"))  # nothing failed
    print(f"trainer + generator task, local: {time.monotonic() - start:.0f} s")


def test_a_killed_generator_task_fails_the_run_in_one_line_and_ends_the_job(tmp_path):
    _, run_dir, controller, tasks = start_detached(tmp_path, "killed", WITH_TASK, PIPELINE)
    os.kill(tasks[1], signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: gone(controller) and gone(tasks[0]), "the job to end", timeout=JOB_END_S, poll_s=0.2)
    final = status(run_dir)
    assert final["state"] == "failed" and "\n" not in final["reason"], final
    assert "generator task" in final["reason"], final
    assert max(train_steps(run_dir)) < STEPS
    print(f"job ended {time.monotonic() - killed:.1f} s after its generator task was killed: {final['reason']}")


def test_rank_0_killed_then_the_rerun_restarts_the_generator_task_and_resumes(one_process, tmp_path):
    spec, run_dir, controller, tasks = start_detached(tmp_path, "resumed", WITH_TASK, PIPELINE)
    os.kill(tasks[0], signal.SIGKILL)
    wait_for(lambda: gone(controller) and gone(tasks[1]), "the job to end", timeout=JOB_END_S, poll_s=0.2)
    again = sweep(tmp_path, spec)
    assert again.returncode == 0, again.stdout + again.stderr
    assert status(run_dir)["state"] == "done"
    assert train_steps(run_dir) == list(range(1, STEPS + 1))
    starts = [r["step"] for r in lines(run_dir) if r["kind"] == "train" and "startup_s" in r]
    assert len(starts) == 2 and starts[0] == 1 and (starts[1] - 1) % 3 == 0, starts  # resumed at a checkpoint
    assert_same_training(one_process, run_dir)


@pytest.mark.slurm
def test_the_sbatch_script_of_a_job_with_a_generator_task_trains_like_one_process(slurm_cluster, one_process,
                                                                                   tmp_path):
    start = time.monotonic()
    plain = sweep(tmp_path, write_spec(tmp_path, "plain", 2, WITH_TASK, overrides=PIPELINE), *SLURM, "--dry-run")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    script = tmp_path / "slurm/plain/tasks_per_node-2.sbatch"
    assert "#SBATCH --ntasks-per-node=2" in script.read_text().splitlines()
    submitted = subprocess.run(["sbatch", "--wait", str(script)], capture_output=True, text=True, timeout=900)
    run_dir = run_dir_of(tmp_path, "plain")
    log = "".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + log[-3000:]
    assert status(run_dir)["state"] == "done"
    assert log.count(f"rlscale: run {run_dir} ended done") == 2  # the trainer and the generator task
    assert_same_training(one_process, run_dir)
    print(f"trainer + generator task, sbatch script: {time.monotonic() - start:.0f} s")
