"""The job shape the report shows per run (Section 3.1's trainer / generator split), from the metrics lines
and config.yaml: ranks and GPUs as the ranks found them, the learner and the PipelineRL generators."""
from __future__ import annotations

import json

import yaml

from rlscale.report.job import JobView
from rlscale.report.content import load_report
from rlscale.testing.results_tree import synthetic_plan, write_results

CLUSTER_LINE = {"step": 10, "kind": "eval", "gpu_hours": 3.0, "gpus": 20, "nodes": 2, "tasks_per_node": 8}
CLUSTER_CONFIG = {"engine": {"learner": "deepspeed", "zero_stage": 3},
                  "offpolicy": {"name": "pipeline", "num_generators": 2}}


def test_a_multi_node_pipeline_job_names_ranks_learner_generators_and_gpus():
    job = JobView.of([{"step": 0, "kind": "eval", "gpu_hours": 0.0, "gpus": 20}, CLUSTER_LINE], CLUSTER_CONFIG)
    assert (job.nodes, job.tasks_per_node, job.ranks, job.gpus, job.generators) == (2, 8, 16, 20, 2)
    assert job.text == "2 nodes x 8 trainer ranks (deepspeed ZeRO-3), 2 generator processes, 20 GPUs"


def test_generator_tasks_are_named_instead_of_generator_processes():
    line = {**CLUSTER_LINE, "nodes": 1, "generator_tasks": 8, "gpus": 16}
    config = {**CLUSTER_CONFIG, "offpolicy": {"name": "pipeline", "num_generators": 8}}
    assert JobView.of([line], config).text == "1 node x 8 trainer ranks (deepspeed ZeRO-3), 8 generator tasks, 16 GPUs"


def test_a_single_process_cpu_run_and_an_older_cuda_run_without_a_gpu_count():
    cpu = JobView.of([{"step": 1, "kind": "train", "core_hours": 0.1}],
                     {"engine": {"learner": "torch", "zero_stage": 2}, "offpolicy": {"name": "ppo"}})
    assert cpu.text == "1 node x 1 trainer rank (torch), cpu"
    older = JobView.of([{"step": 1, "kind": "train", "gpu_hours": 0.1}], {"engine": {"learner": "torch"}})
    assert older.text == "1 node x 1 trainer rank (torch), GPUs unknown"
    assert JobView.of([], {}).text == "1 node x 1 trainer rank (unknown), unknown"


def test_the_report_reads_each_runs_job_from_its_folder(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=2, n_sweeps=1, n_loo_sweeps=0), n_train=5)
    folder = next(root.rglob("metrics.jsonl")).parent
    with open(folder / "metrics.jsonl", "a") as lines:
        lines.write(json.dumps(CLUSTER_LINE) + "\n")
    (folder / "config.yaml").write_text(yaml.safe_dump(CLUSTER_CONFIG))
    shown = {run.path: run.job.text for run in load_report(root, fits).runs}
    assert shown[folder] == "2 nodes x 8 trainer ranks (deepspeed ZeRO-3), 2 generator processes, 20 GPUs"
    assert len(set(shown.values())) == 2
