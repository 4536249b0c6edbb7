"""The job shape of a run (``launcher.nodes`` x ``launcher.tasks_per_node`` tasks: trainer ranks, then
``launcher.generator_tasks`` generator tasks): refused by the
command line in one line naming the field, before anything is written, when the learner, launcher or GPUs
cannot carry it; the split of a node's GPUs between the trainer ranks and PipelineRL's generators; the
generated sbatch script of a multi-rank run asks SLURM for the shape and starts one trainer per task under
srun."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.gpus import GPU_COUNT_ENV, generator_gpus

DEEPSPEED = "engine.learner=deepspeed"
REFUSED = {
    "ranks_need_deepspeed": (["sweep", "conf=loo", "launcher.tasks_per_node=2", "--dry-run"],
                             "field 'launcher.tasks_per_node': 2 trainer ranks need engine.learner=deepspeed"),
    "nodes_need_slurm": (["sweep", "conf=loo", "launcher.nodes=2", DEEPSPEED, "--dry-run"],
                         "field 'launcher.nodes': 2 nodes need launcher=slurm"),
    "a_gpu_per_rank": (["run", "launcher.tasks_per_node=4", DEEPSPEED, "engine.device=cuda",
                        "launcher.gpus_per_node=2", "out=run"],
                       "field 'launcher.tasks_per_node': 4 ranks per node with engine.device=cuda need as many GPUs"),
    "a_gpu_for_the_generators": (["run", "launcher.tasks_per_node=2", DEEPSPEED, "engine.device=cuda",
                                  "launcher.gpus_per_node=2", "offpolicy=pipeline", "out=run"],
                                 "field 'launcher.gpus_per_node': PipelineRL with 2 trainer ranks per node needs GPUs "
                                 "for its generators beyond the trainers' (3 at least), got 2"),
    "generator_tasks_serve_pipeline": (["run", "launcher.tasks_per_node=2", "launcher.generator_tasks=1",
                                        "offpolicy=ppo", "out=run"],
                                       "field 'launcher.generator_tasks': generator tasks serve PipelineRL "
                                       "(offpolicy=pipeline), got offpolicy=ppo"),
    "a_trainer_beside_the_generator_tasks": (["run", "launcher.tasks_per_node=2", "launcher.generator_tasks=2",
                                              "offpolicy.num_generators=2", "out=run"],
                                             "field 'launcher.generator_tasks': 2 of the job's 2 tasks "
                                             "(launcher.nodes x launcher.tasks_per_node) leave no trainer rank"),
    "generators_counted_alike": (["run", "launcher.tasks_per_node=2", "launcher.generator_tasks=1",
                                  "offpolicy.num_generators=2", "out=run"],
                                 "field 'offpolicy.num_generators': 2, but the generators are the job's 1 generator "
                                 "tasks (launcher.generator_tasks); set both alike"),
    "trainer_ranks_less_generator_tasks": (["run", "launcher.tasks_per_node=3", "launcher.generator_tasks=1",
                                            "out=run"],
                                           "field 'launcher.tasks_per_node': 2 trainer ranks need "
                                           "engine.learner=deepspeed"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_shape_the_run_cannot_take_is_refused_in_one_line(case, tmp_path):
    args, message = REFUSED[case]
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_trainer_ranks_take_the_first_gpus_and_generators_the_others_round_robin():
    assert generator_gpus(trainer_ranks=2, visible=4, generators=2) == (2, 3)
    assert generator_gpus(trainer_ranks=2, visible=4, generators=3) == (2, 3, 2)
    assert generator_gpus(trainer_ranks=4, visible=8, generators=8) == (4, 5, 6, 7, 4, 5, 6, 7)
    assert generator_gpus(trainer_ranks=1, visible=2, generators=2) == (1, 1)  # one trainer: the GPUs after its own
    assert generator_gpus(trainer_ranks=1, visible=1, generators=2) == (0, 0)  # one GPU: shared with the trainer
    with pytest.raises(ValueError, match=r"^field 'launcher.gpus_per_node': PipelineRL with 2 trainer ranks per node "
                                         r"needs GPUs for its generators beyond the trainers' \(3 at least\), got 2$"):
        generator_gpus(trainer_ranks=2, visible=2, generators=1)


def test_a_local_lane_on_gpus_leaves_the_generators_a_gpu(workdir, monkeypatch):
    """``engine.device=auto`` on a machine with GPUs (faked): the lane's GPUs are checked before anything is
    written; on CPU the same shape is dealt."""
    monkeypatch.setenv(GPU_COUNT_ENV, "4")  # a lane of 2 GPUs (one per rank) at launcher.gpus_per_node=0
    args = ["sweep", "conf=loo", "launcher.tasks_per_node=2", "offpolicy=pipeline", DEEPSPEED, "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert ("field 'launcher.gpus_per_node': PipelineRL with 2 trainer ranks per node needs GPUs for its generators"
            in " ".join(result.output.split()))
    assert not (workdir / "results").exists()
    assert CliRunner().invoke(app, [*args, "launcher.gpus_per_node=3"]).exit_code == 0
    monkeypatch.setenv(GPU_COUNT_ENV, "0")
    assert CliRunner().invoke(app, args).exit_code == 0


def test_a_local_sweep_takes_one_job_shape(workdir):
    spec = workdir / "mixed.yaml"
    spec.write_text(yaml.safe_dump({"name": "mixed", "kind": "loo", "base": {"name": "scalerl"},
                                    "overrides": [DEEPSPEED],
                                    "variants": {"two_ranks": ["launcher.tasks_per_node=2"]}}))
    result = CliRunner().invoke(app, ["sweep", f"conf={spec}", "--dry-run"])
    assert result.exit_code == 2
    assert ("field 'launcher.tasks_per_node': launcher=local deals one job shape per sweep, got 1 and 2"
            in " ".join(result.output.split()))
    assert not (workdir / "results").exists()


def test_a_multi_rank_script_asks_for_the_shape_and_runs_a_trainer_per_task(workdir):
    result = CliRunner().invoke(app, ["sweep", "conf=loo", "launcher=slurm", "launcher.nodes=2",
                                      "launcher.tasks_per_node=8", "launcher.gpus_per_node=8", DEEPSPEED,
                                      "--seeds", "1", "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = (workdir / "slurm/loo/scalerl.sbatch").read_text().splitlines()
    run_dir = (workdir / "results/loo/scalerl").resolve()
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=8" in lines
    assert f"srun --kill-on-bad-exit=1 {sys.executable} -m rlscale.train {run_dir} &" in lines
    single = CliRunner().invoke(app, ["sweep", "conf=loo", "launcher=slurm", "--seeds", "1", "--dry-run",
                                      "--results", "one", "--sbatch-dir", "one_slurm"])
    assert single.exit_code == 0, single.output
    lines = (workdir / "one_slurm/loo/scalerl.sbatch").read_text().splitlines()
    assert "#SBATCH --nodes=1" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert not any("srun" in line for line in lines)
    assert f"{sys.executable} -m rlscale.train {(workdir / 'one/loo/scalerl').resolve()} &" in lines
