"""Whole runs of the two off-policy algorithms of Section 3.1 on the embedded task (tiny batches):
PPO-off-policy-k's lag cycles 0..k-1 with one batch generated every step from the block's weights; PipelineRL-k's recorded lag never
exceeds k, k = 0 is on-policy, a resumed run carries on; with scheduled in-flight updates one seed gives one
curve however the trainer is slowed, and a run resumed after a crash repeats the uninterrupted one; a
killed generator fails the run, a killed trainer takes its generators with it."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from rlscale.config import compose_run_config, typed
from rlscale.config.schema import OFFPOLICY_K
from rlscale.runfolder.metrics import MEASURED_FIELDS
from rlscale.train.checkpoint import read_seal, save_checkpoint
from rlscale.train.offpolicy import pipeline
from rlscale.train.loop import train
from waiting import wait_for

DEADLINE_S = 120.0


def overrides(run_dir: Path, mode: str, k: int, steps: int, *extra: str) -> List[str]:
    return [f"offpolicy={mode}", f"{OFFPOLICY_K[mode]}={k}", "batch.prompts=4", "batch.generations=4", "engine.threads=1",
            f"trainer.max_steps={steps}", "trainer.eval_every=1000", "trainer.eval_samples=1",
            "trainer.checkpoint_every=2", f"out={run_dir}", *extra]


def run(run_dir: Path, mode: str, k: int, steps: int, *extra: str) -> str:
    return train(typed(compose_run_config(overrides(run_dir, mode, k, steps, *extra))), run_dir)


def train_lines(run_dir: Path) -> List[dict]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["kind"] == "train"]


def status(run_dir: Path) -> dict:
    return json.loads((run_dir / "status.json").read_text())



def test_ppo_offpolicy_generates_every_step_and_lags_up_to_k_minus_1(tmp_path):
    assert run(tmp_path, "ppo", 3, 6) == "done"
    lines = train_lines(tmp_path)
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5, 6]
    for r in lines:
        lag = (r["step"] - 1) % 3  # k batches sampled with the weights of the first of the k updates
        assert r["lag_min"] == r["lag_max"] == lag
        assert r["trainer_wait_s"] > 0  # each update waits for its own batch, none for k of them
        assert 0.0 <= r["generator_idle_frac"] <= 1.0


@pytest.mark.parametrize("stage", [2, 3])
def test_ppo_offpolicy_with_deepspeed_trains_the_live_weights_after_sampling_the_kept_ones(tmp_path, stage):
    """ZeRO-2 trains the policy's own (flattened) tensors, ZeRO-3 a partitioned copy published back into it:
    either way the kept weights go in for generation and the trained ones come back, so the run matches the
    torch learner's run (same seed) to the DeepSpeed learner's tolerance."""
    torch_run, ds_run = tmp_path / "torch", tmp_path / f"zero{stage}"
    assert run(torch_run, "ppo", 2, 4) == "done"
    assert run(ds_run, "ppo", 2, 4, "engine=deepspeed", f"engine.zero_stage={stage}") == "done"
    for a, b in zip(train_lines(torch_run), train_lines(ds_run)):
        assert a["lag_max"] == b["lag_max"] == (a["step"] - 1) % 2
        assert a["response_tokens_mean"] == b["response_tokens_mean"]  # same samples, step after step
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * max(1.0, abs(a["loss"]))


def test_pipeline_k0_is_on_policy_and_resumes(tmp_path):
    assert run(tmp_path, "pipeline", 0, 3) == "done"
    assert run(tmp_path, "pipeline", 0, 5) == "done"  # resumes from the step-3 checkpoint
    lines = train_lines(tmp_path)
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5]
    for r in lines:
        assert r["lag_min"] == r["lag_max"] == 0  # every token sampled by the weights it is trained against
        assert abs(r["ratio_mean"] - 1.0) < 1e-3
        assert r["weight_sync_s"] >= 0 and r["queue_depth"] >= 0


def test_pipeline_checkpoint_of_an_older_rlscale_fails_clearly_and_is_kept(tmp_path):
    assert run(tmp_path, "pipeline", 0, 2) == "done"
    path = tmp_path / "checkpoints" / "last.pt"
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["source"] = {"consumed": 8, "ready": [], "in_flight": [3, 1, 4, 1]}  # prompt ids, no chunks
    save_checkpoint(tmp_path, checkpoint, read_seal(path).identity)
    before = {name: (tmp_path / name).read_bytes() for name in ("checkpoints/last.pt", "metrics.jsonl")}
    assert run(tmp_path, "pipeline", 0, 4) == "failed"
    assert status(tmp_path)["reason"] == ("ValueError: checkpoints/last.pt: its PipelineRL state has no chunk "
                                          "positions (an older rlscale wrote it); resume it with that rlscale, or "
                                          "start the run again in a new directory")
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_pipeline_recorded_lag_never_exceeds_k_with_two_generators(tmp_path):
    assert run(tmp_path, "pipeline", 1, 6, "offpolicy.num_generators=2") == "done"  # 2-prompt chunks, any order
    lines = train_lines(tmp_path)
    assert len(lines) == 6
    assert all(0 <= r["lag_min"] <= r["lag_mean"] <= r["lag_max"] <= 1 for r in lines)
    assert all(0.0 <= r["generator_idle_frac"] <= 1.0 and r["trainer_wait_s"] >= 0 for r in lines)


def test_pipeline_dynamic_sampling_draws_more_groups_on_policy(tmp_path):
    assert run(tmp_path, "pipeline", 0, 3, "filtering=dynamic_sampling") == "done"
    lines = train_lines(tmp_path)
    assert len(lines) == 3 and lines[-1]["samples"] > 3 * 4 * 4  # zero-variance groups were replaced
    assert all(r["lag_max"] == 0 for r in lines)  # groups drawn on demand are sampled by the current weights


TIMING_FIELDS = MEASURED_FIELDS


SCHEDULED = ("offpolicy.num_generators=2", "offpolicy.update_every_tokens=8")  # chunks finish in any order


def slow_down_the_trainer(monkeypatch) -> None:
    """Every publication waits 0-0.4 s, drawn unseeded: the timing differs from run to run."""
    publish = pipeline.PipelineSource.after_update
    delays = random.Random()

    def slow_publish(self, model, version: int) -> None:
        time.sleep(delays.uniform(0.0, 0.4))
        publish(self, model, version)
    monkeypatch.setattr(pipeline.PipelineSource, "after_update", slow_publish)


LEARNER_FLOATS = {"clip_fraction", "entropy", "grad_norm", "loss", "ratio_mean"}


def assert_same_curve(a: List[dict], b: List[dict], learner_rel: float = 0.0) -> None:
    """Every logged value but timings is equal; the learner's float statistics to ``learner_rel`` (on CUDA
    the trainer is not bitwise deterministic: an H200 gave differences up to 2e-6 relative between two runs,
    with the same samples, rewards and lags)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        exact = TIMING_FIELDS | (LEARNER_FLOATS if learner_rel else set())
        assert {k: v for k, v in x.items() if k not in exact} == {k: v for k, v in y.items() if k not in exact}
        learner = pytest.approx({k: y[k] for k in LEARNER_FLOATS}, rel=learner_rel)
        assert {k: x[k] for k in LEARNER_FLOATS} == learner


CUDA_LEARNER_REL = 1e-4  # 50x the largest difference seen
DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")])]


def scheduled_on(device: str) -> tuple:
    return (*SCHEDULED, f"engine.device={device}")


def learner_tolerance(device: str) -> float:
    return CUDA_LEARNER_REL if device == "cuda" else 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_scheduled_pipeline_gives_one_curve_per_seed_however_slow_the_trainer(tmp_path, monkeypatch, device):
    scheduled = scheduled_on(device)
    assert run(tmp_path / "a", "pipeline", 2, 6, *scheduled) == "done"
    slow_down_the_trainer(monkeypatch)
    assert run(tmp_path / "b", "pipeline", 2, 6, *scheduled) == "done"
    a = train_lines(tmp_path / "a")
    assert_same_curve(a, train_lines(tmp_path / "b"), learner_tolerance(device))
    assert len(a) == 6 and any(r["lag_min"] < r["lag_max"] for r in a) and max(r["lag_max"] for r in a) == 2


def crash_before_publishing(monkeypatch, version: int) -> None:
    """The trainer dies right after optimizer step ``version`` (before publishing it), like a preempted job."""
    publish = pipeline.PipelineSource.after_update

    def crashing_publish(self, model, v: int) -> None:
        if v == version:
            raise RuntimeError("preempted")
        publish(self, model, v)
    monkeypatch.setattr(pipeline.PipelineSource, "after_update", crashing_publish)


@pytest.mark.parametrize("device", DEVICES)
def test_scheduled_pipeline_resumed_after_a_crash_repeats_the_uninterrupted_run(tmp_path, monkeypatch, device):
    scheduled = scheduled_on(device)
    assert run(tmp_path / "whole", "pipeline", 2, 6, *scheduled) == "done"
    with monkeypatch.context() as patch:
        crash_before_publishing(patch, 5)
        assert run(tmp_path / "cut", "pipeline", 2, 6, *scheduled) == "failed"
    checkpoint = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=False)
    assert checkpoint["step"] == 4
    chunks = checkpoint["source"]["in_flight"]
    assert [v for v, _ in checkpoint["source"]["versions"]] == list(range(min(c[2] for c in chunks), 4))
    assert checkpoint["source"]["versions"]  # chunks issued at older versions were in flight
    slow_down_the_trainer(monkeypatch)
    assert run(tmp_path / "cut", "pipeline", 2, 6, *scheduled) == "done"  # resumes from the step-4 checkpoint
    whole = train_lines(tmp_path / "whole")
    assert [r["step"] for r in whole] == [1, 2, 3, 4, 5, 6]
    assert_same_curve(whole, train_lines(tmp_path / "cut"), learner_tolerance(device))


def process_table() -> Dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                table[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    return table


def generator_pids(trainer: int) -> List[int]:
    """The trainer's grandchildren: trainer -> forkserver -> generator processes."""
    table = process_table()
    children = {p for p, parent in table.items() if parent == trainer}
    return [p for p, parent in table.items() if parent in children]


def test_killed_generator_fails_the_run_within_a_timeout(tmp_path):
    killed: List[int] = []

    def kill_a_generator() -> None:
        metrics = tmp_path / "metrics.jsonl"
        wait_for(lambda: metrics.exists() and metrics.read_text().count('"train"') >= 2, "two steps")
        killed.append(generator_pids(os.getpid())[0])
        os.kill(killed[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_a_generator, daemon=True)
    killer.start()
    start = time.monotonic()
    assert run(tmp_path, "pipeline", 2, 1000) == "failed"
    killer.join()
    assert killed and time.monotonic() - start < DEADLINE_S
    assert "generator process 0 exited with code -9" in status(tmp_path)["reason"]


@pytest.mark.slow
def test_generators_exit_when_the_trainer_is_killed(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-m", "rlscale.cli", "run", *overrides(tmp_path, "pipeline", 8, 1000)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        metrics = tmp_path / "metrics.jsonl"
        wait_for(lambda: metrics.exists() and metrics.read_text().count('"train"') >= 2, "two steps", 300)
        generators = generator_pids(trainer.pid)
        assert generators
        os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait()
        wait_for(lambda: not set(generators) & set(process_table()), "the generators to exit", 30)
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
