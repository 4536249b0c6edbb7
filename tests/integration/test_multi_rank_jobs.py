"""A variant is a cluster job: a run over two trainer ranks (``launcher.tasks_per_node=2``,
``engine.learner=deepspeed``, gloo on CPU) launched by ``rlscale sweep`` trains like one process.

- local executor: the 2-task job's train metrics and final weights equal a one-process DeepSpeed run's, with
  PPO and with PipelineRL (rank 0's generator process takes rank 0's weights after every update; scheduled
  in-flight updates make which version samples which token independent of timing);
- real SLURM (localhost): the same through a submitit job array of 2-task jobs, and through the generated
  sbatch script (``srun`` starts one trainer per task); a job signalled before its time limit is requeued,
  both tasks start again and the run resumes to the same result (SLURM holds a requeued job for its credential
  lifetime, ``AuthInfo=cred_expire``: 20 s in ``scripts/slurm-localhost.sh``, 120 s by default);
- a follower rank killed mid-run fails the run with one line in status.json and the job ends at once;
- rank 0 killed mid-run ends the job too; the sweep rerun restarts both ranks, which resume from rank 0's
  checkpoint and end equal to the uninterrupted run.

Tolerance: the ranks' gradients are summed in another order than one process sums them (each rank sums its
shard of rows, then gloo adds the two), so float32 rounding differs by an ulp or so and grows a little over
AdamW updates: loss and gradient statistics are compared to 1e-5 relative (seen: 2.4e-6 at most), the final
weights to 1e-6 absolute (seen: 1.2e-7, one ulp of the largest weight). Everything sampled (rewards,
samples, tokens, FLOPs, eval rewards) must be equal: the differences stay far below what changes a sample.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
import torch
import yaml

from bench_runs import NUMBER, bench
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

STEPS = 8
OVERRIDES = [f"trainer.max_steps={STEPS}", "trainer.eval_every=4", "trainer.checkpoint_every=3",
             "task.val_size=40", "offpolicy=ppo", "engine.learner=deepspeed", "engine.device=cpu"]
CLOSE = ("loss", "grad_norm", "entropy", "clip_fraction", "ratio_mean", "lr")
EQUAL = ("reward", "pass_rate", "samples", "tokens", "flops", "response_tokens_mean", "kept_prompt_fraction")
REL, WEIGHTS_ABS = 1e-5, 1e-6
JOB_END_S = 60  # a job whose rank died ends within this


PIPELINE = [o for o in OVERRIDES if not o.startswith("offpolicy=")] + ["offpolicy=pipeline",
                                                                       "offpolicy.update_every_tokens=16"]


def write_spec(folder: Path, name: str, ranks: int, extra: List[str] = (), overrides: List[str] = OVERRIDES) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "kind": "grid", "base": {"name": f"tasks_per_node-{ranks}"},
                                    "axes": {"launcher.tasks_per_node": [ranks]}, "seeds": 1,
                                    "overrides": list(overrides) + list(extra)}, sort_keys=False))
    return path


def sweep(folder: Path, spec: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "sweep", f"conf={spec}", "--results",
                           str(folder / "results"), *args], capture_output=True, text=True, timeout=900, cwd=folder)
    return done


def run_dir_of(folder: Path, name: str) -> Path:
    return next((folder / "results" / name).glob("*/config.yaml")).parent


def lines(run_dir: Path) -> List[Dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def status(run_dir: Path) -> Dict:
    return json.loads((run_dir / "status.json").read_text())


def train_steps(run_dir: Path) -> List[int]:
    if not (run_dir / "metrics.jsonl").exists():
        return []
    return [r["step"] for r in lines(run_dir) if r["kind"] == "train"]


def weights(run_dir: Path) -> Dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)["model"]


def assert_same_training(reference: Path, run: Path, ranks: int = 2) -> Dict[str, float]:
    """The run's train and eval lines and final weights equal the reference's (tolerances above); the
    largest differences seen."""
    expected, got = lines(reference), lines(run)
    assert [(r["kind"], r["step"]) for r in got] == [(r["kind"], r["step"]) for r in expected]
    worst = {key: 0.0 for key in CLOSE}
    for exp, act in zip(expected, got):
        assert (act.get("nodes"), act.get("tasks_per_node")) == ((1, ranks) if ranks > 1 else (None, None))
        if exp["kind"] == "eval":
            assert act["val_reward"] == exp["val_reward"], exp["step"]
            continue
        for key in EQUAL:
            assert act[key] == exp[key], (exp["step"], key)
        for key in CLOSE:
            assert act[key] == pytest.approx(exp[key], rel=REL, abs=1e-7), (exp["step"], key)
            worst[key] = max(worst[key], abs(act[key] - exp[key]) / max(abs(exp[key]), 1e-12))
    a, b = weights(reference), weights(run)
    worst["weights"] = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst["weights"] < WEIGHTS_ABS
    print("largest differences:", worst)
    return worst


def rank_pids(controller: int) -> Dict[int, int]:
    """{rank: pid} of the tasks of a submitit local job (children of its controller)."""
    ranks = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            env = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == controller:
            for item in env:
                if item.startswith(b"SUBMITIT_LOCAL_GLOBALID="):
                    ranks[int(item.split(b"=")[1])] = int(proc.name)
    return ranks


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> Path:
    """The reference: the same config trained by a one-process DeepSpeed job of a local sweep."""
    folder = tmp_path_factory.mktemp("one")
    done = sweep(folder, write_spec(folder, "one", 1))
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir_of(folder, "one")


def test_a_two_rank_local_job_trains_like_one_process(one_process, tmp_path):
    start = time.monotonic()
    done = sweep(tmp_path, write_spec(tmp_path, "two", 2))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = run_dir_of(tmp_path, "two")
    assert status(run_dir)["state"] == "done"
    job = json.loads((tmp_path / "results/two/sweep.json").read_text())["jobs"][run_dir.name]
    outcomes = [pickle.loads((tmp_path / "results/two/.submitit" / f"{job}_{task}_result.pkl").read_bytes())
                for task in (0, 1)]
    assert outcomes == [("success", {run_dir.name: "done"})] * 2  # task 1 followed the run to its end
    assert_same_training(one_process, run_dir)
    print(f"two-rank local sweep: {time.monotonic() - start:.0f} s")
    # bench/multi_gpu_job.sh's tables (bench/multi_gpu_table.py) on these runs: its CPU mode in CI, less the runs
    tables = tmp_path / "tables"
    printed = bench("multi_gpu_table.py", "equality", str(one_process), str(run_dir), "--out", str(tables)).stdout
    assert re.search(r"^final max \|dw\| = \S+; tolerance 1e-04 relative: PASS$", printed, re.M), printed
    assert json.loads((tables / "equality.json").read_text())["pass"] is True
    printed = bench("multi_gpu_table.py", "throughput", f"1 rank:0={one_process}", f"2 ranks:0={run_dir}",
                    "--out", str(tables), "--warmup", "2").stdout
    assert re.search(rf"^\| 2 ranks \| 2 \| 0 \| {STEPS - 2} \| {NUMBER} \| {NUMBER} \| {NUMBER} \|$", printed, re.M), printed
    assert re.search(rf"^samples/s 2 ranks / 1 rank = {NUMBER}x \(target >= 1.6x: (met|NOT met)\)$", printed, re.M)


def test_a_two_rank_pipeline_job_trains_like_one_process(tmp_path):
    """PipelineRL over two trainer ranks: rank 0 alone starts the generator and publishes its weights after each
    update (ZeRO-2: rank 0 holds the whole updated policy); the run equals a one-process pipeline run."""
    one = sweep(tmp_path, write_spec(tmp_path, "pipe1", 1, overrides=PIPELINE))
    assert one.returncode == 0, one.stdout + one.stderr
    two = sweep(tmp_path, write_spec(tmp_path, "pipe2", 2, overrides=PIPELINE))
    assert two.returncode == 0, two.stdout + two.stderr
    reference, run_dir = run_dir_of(tmp_path, "pipe1"), run_dir_of(tmp_path, "pipe2")
    assert status(run_dir)["state"] == "done"
    trained = [r for r in lines(run_dir) if r["kind"] == "train"]
    assert all(r["weight_sync_s"] > 0 for r in trained)  # a publication after every update
    assert_same_training(reference, run_dir)


def start_detached(folder: Path, name: str, extra: List[str] = (), overrides: List[str] = OVERRIDES) -> tuple:
    """A detached local sweep of one 2-task job, once it has trained past its checkpoint of step 3: (spec, run
    folder, the job's controller pid, {task: pid})."""
    spec = write_spec(folder, name, 2, extra, overrides)
    started = sweep(folder, spec, "--detach")
    assert started.returncode == 0, started.stdout + started.stderr
    run_dir = run_dir_of(folder, name)
    controller = int(json.loads((folder / "results" / name / "sweep.json").read_text())["jobs"][run_dir.name])
    wait_for(lambda: 4 in train_steps(run_dir), "step 4 (past the checkpoint of step 3)", timeout=300, poll_s=0.05)
    ranks = rank_pids(controller)
    assert sorted(ranks) == [0, 1], ranks
    return spec, run_dir, controller, ranks


def test_a_killed_follower_fails_the_run_in_one_line_and_ends_the_job(tmp_path):
    _, run_dir, controller, ranks = start_detached(tmp_path, "killed")
    os.kill(ranks[1], signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: gone(controller) and gone(ranks[0]), "the job to end", timeout=JOB_END_S, poll_s=0.2)
    ended = time.monotonic() - killed
    final = status(run_dir)
    assert final["state"] == "failed" and final["reason"] and "\n" not in final["reason"], final
    assert max(train_steps(run_dir)) < STEPS
    print(f"job ended {ended:.1f} s after its follower was killed; status.json: {final['reason']}")


def test_rank_0_killed_then_the_sweep_rerun_resumes_to_the_same_result(one_process, tmp_path):
    spec, run_dir, controller, ranks = start_detached(tmp_path, "resumed")
    os.kill(ranks[0], signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: gone(controller) and gone(ranks[1]), "the job to end", timeout=JOB_END_S, poll_s=0.2)
    print(f"job ended {time.monotonic() - killed:.1f} s after rank 0 was killed")
    assert max(train_steps(run_dir)) < STEPS
    again = sweep(tmp_path, spec)
    assert again.returncode == 0, again.stdout + again.stderr
    assert status(run_dir)["state"] == "done"
    records = lines(run_dir)  # a resume cuts metrics.jsonl back to its checkpoint: every step once
    assert train_steps(run_dir) == list(range(1, STEPS + 1))
    starts = [r["step"] for r in records if r["kind"] == "train" and "startup_s" in r]
    assert starts == [1, 4]  # the rerun started from the checkpoint of step 3
    assert_same_training(one_process, run_dir)


SLURM = ["launcher=slurm", "launcher.mem_gb=4", "launcher.timeout_min=30"]


@pytest.mark.slurm
def test_a_two_rank_slurm_job_trains_like_one_process(slurm_cluster, one_process, tmp_path):
    """A submitit job array whose task is a 2-task job, then the generated sbatch script (srun, one trainer
    per task) of another run directory."""
    start = time.monotonic()
    spec = write_spec(tmp_path, "array", 2)
    done = sweep(tmp_path, spec, *SLURM)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = run_dir_of(tmp_path, "array")
    assert status(run_dir)["state"] == "done"
    job = json.loads((tmp_path / "results/array/sweep.json").read_text())["jobs"][run_dir.name]
    steps = subprocess.run(["sacct", "-n", "-P", "-j", job, "-o", "JobName,NTasks"], capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert "python|2" in steps.splitlines() or any(line.endswith("|2") for line in steps.splitlines()), steps
    assert_same_training(one_process, run_dir)
    print(f"two-rank submitit SLURM job: {time.monotonic() - start:.0f} s")

    start = time.monotonic()
    plain = sweep(tmp_path, write_spec(tmp_path, "plain", 2), *SLURM, "--dry-run")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    script = tmp_path / "slurm/plain/tasks_per_node-2.sbatch"
    assert "#SBATCH --ntasks-per-node=2" in script.read_text().splitlines()
    submitted = subprocess.run(["sbatch", "--wait", str(script)], capture_output=True, text=True, timeout=900)
    run_dir = run_dir_of(tmp_path, "plain")
    log = "".join(p.read_text() for p in run_dir.glob("slurm-*.out"))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + log[-3000:]
    assert status(run_dir)["state"] == "done"
    assert log.count(f"rlscale: run {run_dir} ended done") == 2  # both tasks ran the trainer to the end
    assert_same_training(one_process, run_dir)
    print(f"two-rank sbatch script: {time.monotonic() - start:.0f} s")


@pytest.mark.slurm
def test_a_signalled_two_rank_slurm_job_is_requeued_and_resumes_every_rank(slurm_cluster, one_process, tmp_path):
    """The signal SLURM sends before a time limit: submitit checkpoints on rank 0 and requeues the job, whose
    two tasks both start again; the run resumes from rank 0's checkpoint and ends as the uninterrupted run."""
    spec = write_spec(tmp_path, "requeued", 2)
    started = sweep(tmp_path, spec, *SLURM, "--detach")
    assert started.returncode == 0, started.stdout + started.stderr
    run_dir = run_dir_of(tmp_path, "requeued")
    job = json.loads((tmp_path / "results/requeued/sweep.json").read_text())["jobs"][run_dir.name]
    wait_for(lambda: 4 in train_steps(run_dir), "step 4 (past the checkpoint of step 3)", timeout=600, poll_s=0.05)
    subprocess.run(["scancel", "--signal=USR2", job], check=True, timeout=60)

    def history() -> List[str]:
        return subprocess.run(["sacct", "-n", "-X", "-D", "-j", job, "-o", "State"], capture_output=True, text=True,
                              timeout=60, check=True).stdout.split()

    wait_for(lambda: history()[-1:] in (["COMPLETED"], ["FAILED"]), "the job to end", timeout=900, poll_s=2)
    assert "REQUEUED" in history() and history()[-1] == "COMPLETED", history()
    assert status(run_dir)["state"] == "done", status(run_dir)
    starts = [r["step"] for r in lines(run_dir) if r["kind"] == "train" and "startup_s" in r]
    assert len(starts) == 2 and starts[0] == 1 and (starts[1] - 1) % 3 == 0, starts  # resumed at a checkpoint
    assert_same_training(one_process, run_dir)
