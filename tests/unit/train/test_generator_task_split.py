"""A job's tasks split between trainer ranks and generator tasks (``launcher.generator_tasks``, the job's last
tasks): a generator task learns its index, a trainer rank sees torch's world narrowed to the trainer ranks (of
the job and of its node), the split is made once, and the job shape the meter and the metrics lines carry counts
the generator tasks' nodes; the weights travel in buckets of one dtype."""
from __future__ import annotations

import os

import pytest
import torch

from rlscale.train.compute import JobShape
from rlscale.train.offpolicy import pipeline_remote
from rlscale.train.ranks import JOB_TASKS_ENV, job_tasks, split_generator_tasks

TORCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", JOB_TASKS_ENV)


def task_env(monkeypatch, rank: int, world: int, per_node: int) -> None:
    """Task ``rank``'s variables; the split writes os.environ itself, so every name is restored after the test."""
    for name in TORCH_ENV:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    for name, value in (("RANK", rank), ("WORLD_SIZE", world), ("LOCAL_RANK", rank % per_node),
                        ("LOCAL_WORLD_SIZE", per_node)):
        monkeypatch.setenv(name, str(value))


@pytest.mark.parametrize("rank, expected", [(0, None), (3, None), (4, 0), (7, 3)])
def test_two_nodes_of_four_with_four_generator_tasks(monkeypatch, rank, expected):
    """Node 0 holds the 4 trainer ranks, node 1 the 4 generator tasks."""
    task_env(monkeypatch, rank, 8, 4)
    assert split_generator_tasks(4) == expected
    assert split_generator_tasks(4) == expected  # made once: asking again changes nothing
    assert job_tasks() == (8, 4, 4)
    shape = JobShape.of_environment()
    if expected is None:
        assert (shape.nodes, shape.tasks_per_node, shape.generator_tasks, shape.job_nodes) == (1, 4, 4, 2)
        assert shape.as_metrics() == {"nodes": 1, "tasks_per_node": 4, "generator_tasks": 4}


def test_a_node_shared_by_trainers_and_generator_tasks(monkeypatch):
    """One node of 4 tasks, 2 of them generator tasks: the trainers' node world is 2, the job holds 1 node."""
    task_env(monkeypatch, 1, 4, 4)
    assert split_generator_tasks(2) is None
    assert (os.environ["WORLD_SIZE"], os.environ["LOCAL_WORLD_SIZE"]) == ("2", "2")
    shape = JobShape.of_environment()
    assert (shape.nodes, shape.tasks_per_node, shape.job_nodes) == (1, 2, 1)


def test_without_generator_tasks_nothing_changes(monkeypatch):
    task_env(monkeypatch, 1, 2, 2)
    assert split_generator_tasks(0) is None
    assert job_tasks() == (2, 2, 0)
    assert JobShape.of_environment().as_metrics() == {"nodes": 1, "tasks_per_node": 2}
    for name in TORCH_ENV:
        monkeypatch.delenv(name, raising=False)
    assert JobShape.of_environment().as_metrics() == {}


def test_weights_travel_in_buckets_of_one_dtype(monkeypatch):
    monkeypatch.setattr(pipeline_remote, "BUCKET_BYTES", 64)
    tensors = [torch.zeros(8), torch.zeros(8), torch.zeros(4, dtype=torch.float64), torch.zeros(100), torch.zeros(2)]
    sizes = [[t.numel() for t in bucket] for bucket in pipeline_remote.buckets(tensors)]
    assert sizes == [[8, 8], [4], [100], [2]]  # 64 bytes at most, one dtype, a larger tensor alone


def test_tied_weights_travel_once():
    embedding = torch.zeros(4, 2)
    weights = {"embed.weight": embedding, "norm.weight": torch.ones(2), "lm_head.weight": embedding}
    assert pipeline_remote.distinct_keys(weights) == ["embed.weight", "norm.weight"]
    untied = {**weights, "lm_head.weight": embedding.clone()}
    assert pipeline_remote.distinct_keys(untied) == ["embed.weight", "norm.weight", "lm_head.weight"]
