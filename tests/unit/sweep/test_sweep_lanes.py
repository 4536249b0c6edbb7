"""GPU lanes of ``launcher=local``: on a machine with GPUs the runs are dealt into lanes of
``launcher.gpus_per_node`` GPUs, each lane's job sees only its own (through submitit's LocalExecutor and its
``visible_gpus``), lanes are counted by GPUs, and ``engine.device=auto`` refuses to fall back to CPU while
GPUs exist but are hidden.

The GPUs are faked with ``RLSCALE_GPUS`` (rlscale.gpus: the number of GPUs rlscale assumes this machine
has); submitit's LocalExecutor then sets each job's CUDA_VISIBLE_DEVICES as on a real GPU machine."""
from __future__ import annotations

import os

import pytest
import submitit
import torch

from rlscale.sweep.launchers import LocalConfig
from rlscale.gpus import GPU_COUNT_ENV
from rlscale.sweep.lanes import Lane, deal_lanes, machine_gpus
from rlscale.train.components import pick_device


def test_lanes_are_counted_by_gpus_when_there_are_gpus():
    lanes = deal_lanes(5, LocalConfig(gpus_per_node=2), gpus=(0, 1, 2, 3, 4), cores=16)
    assert lanes == [Lane(runs=(0, 2, 4), gpus=(0, 1), threads=8), Lane(runs=(1, 3), gpus=(2, 3), threads=8)]
    one_each = deal_lanes(8, LocalConfig(), gpus=(0, 1, 2, 3), cores=2)  # gpus_per_node 0: one GPU a lane
    assert [lane.gpus for lane in one_each] == [(0,), (1,), (2,), (3,)] and {lane.threads for lane in one_each} == {1}
    capped = deal_lanes(8, LocalConfig(gpus_per_node=1, max_parallel=2), gpus=(0, 1, 2, 3), cores=2)
    assert [lane.gpus for lane in capped] == [(0,), (1,)]
    single = deal_lanes(1, LocalConfig(gpus_per_node=2), gpus=(4, 5, 6, 7), cores=2)
    assert [lane.gpus for lane in single] == [(4, 5)]


def test_without_gpus_lanes_are_counted_by_cores():
    lanes = deal_lanes(5, LocalConfig(), gpus=(), cores=2)
    assert lanes == [Lane(runs=(0, 2, 4), gpus=(), threads=1), Lane(runs=(1, 3), gpus=(), threads=1)]
    assert len(deal_lanes(5, LocalConfig(max_parallel=3), gpus=(), cores=2)) == 3
    assert lanes[0].executor_parameters() == {"gpus_per_node": 0, "visible_gpus": (), "tasks_per_node": 1}


def test_a_lane_of_a_multi_rank_run_holds_a_gpu_or_a_core_per_rank():
    on_cpu = deal_lanes(3, LocalConfig(tasks_per_node=2), gpus=(), cores=4)
    assert on_cpu == [Lane(runs=(0, 2), gpus=(), threads=1, tasks=2), Lane(runs=(1,), gpus=(), threads=1, tasks=2)]
    assert deal_lanes(3, LocalConfig(tasks_per_node=2), gpus=(), cores=2) == [
        Lane(runs=(0, 1, 2), gpus=(), threads=1, tasks=2)]
    on_gpus = deal_lanes(3, LocalConfig(tasks_per_node=2), gpus=(0, 1, 2, 3), cores=8)  # gpus_per_node 0
    assert [(lane.gpus, lane.tasks) for lane in on_gpus] == [((0, 1), 2), ((2, 3), 2)]
    assert on_gpus[1].executor_parameters() == {"gpus_per_node": 2, "visible_gpus": (2, 3), "tasks_per_node": 2}
    with pytest.raises(ValueError, match=r"^launcher.tasks_per_node=4: this machine shows 2 GPU\(s\) \(0, 1\)$"):
        deal_lanes(1, LocalConfig(tasks_per_node=4), gpus=(0, 1), cores=2)


def test_too_few_gpus_for_a_lane_names_the_field():
    with pytest.raises(ValueError, match=r"^launcher.gpus_per_node=4: this machine shows 2 GPU\(s\) \(0, 1\)$"):
        deal_lanes(3, LocalConfig(gpus_per_node=4), gpus=(0, 1), cores=2)


def test_the_machine_gpus_follow_cuda_visible_devices_or_the_override(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv(GPU_COUNT_ENV, raising=False)
    assert machine_gpus() == (2, 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert machine_gpus() == ()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5e1c2f")
    with pytest.raises(ValueError, match="^CUDA_VISIBLE_DEVICES='GPU-5e1c2f': launcher=local deals GPUs by index"):
        machine_gpus()
    monkeypatch.setenv(GPU_COUNT_ENV, "4")
    assert machine_gpus() == (0, 1, 2, 3)
    monkeypatch.setenv(GPU_COUNT_ENV, "four")
    with pytest.raises(ValueError, match="^RLSCALE_GPUS='four': expected a number of GPUs"):
        machine_gpus()


def test_local_executor_jobs_of_two_lanes_see_disjoint_gpus(tmp_path, monkeypatch):
    """Four faked GPUs, two per lane: each lane's submitit job sees its own two as CUDA_VISIBLE_DEVICES."""
    monkeypatch.setenv(GPU_COUNT_ENV, "4")
    lanes = deal_lanes(4, LocalConfig(gpus_per_node=2), machine_gpus(), cores=2)
    executor = submitit.LocalExecutor(folder=tmp_path / "%j")
    jobs = []
    for lane in lanes:
        executor.update_parameters(timeout_min=2, **lane.executor_parameters())
        jobs.append(executor.submit(os.getenv, "CUDA_VISIBLE_DEVICES"))
    seen = [job.result() for job in jobs]
    assert seen == ["0,1", "2,3"]
    devices = [set(s.split(",")) for s in seen]
    assert not devices[0] & devices[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a process that sees no CUDA device")
def test_auto_device_refuses_cpu_while_gpus_are_hidden(monkeypatch):
    monkeypatch.setenv(GPU_COUNT_ENV, "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=r"^engine.device=auto: this machine has 2 GPU\(s\) but this process sees "
                                           r"none \(CUDA_VISIBLE_DEVICES=''"):
        pick_device("auto")
    assert pick_device("cpu").type == "cpu"
    monkeypatch.setenv(GPU_COUNT_ENV, "0")
    assert pick_device("auto").type == "cpu"  # no GPUs on the machine: CPU is no fallback
