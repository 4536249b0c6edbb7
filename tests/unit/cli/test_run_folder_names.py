"""A folder per distinct ``rlscale run``: named after its overrides (sorted, so any order finds the same folder,
cut with a hash when long), placed by ``out=``/``variant=`` when given, with overrides.yaml and versions.yaml
beside config.yaml, and the run's log lines in its train.log, each carrying its name."""
from __future__ import annotations

import logging

import yaml

from rlscale.runfolder.names import name_problem, run_name
from rlscale.train.entry import named_run, prepare_run_dir
from rlscale.train.logs import run_logging
from rlscale.train.records import ABSENT, PACKAGES, package_version


def test_run_names_tell_runs_apart():
    assert run_name([]) == "run"
    assert run_name(["loss=dapo", "batch.prompts=8"]) == run_name(["batch.prompts=8", "loss=dapo"]) == \
        "batch.prompts-8_loss-dapo"
    assert run_name(["+task.note='a b/c'", "~logger"]) == "no-logger_task.note-a-b-c"
    assert run_name(["out=x", "sweep=s", "variant=v", "seed=3"]) == "seed-3"  # the folder's own keys left out
    long = [f"task.part{i}=value{i}" for i in range(8)]
    cut = run_name(long)
    assert len(cut) <= 80 and name_problem(cut) is None and cut != run_name(long[:-1] + ["task.part7=other"])
    assert cut.startswith("task.part0-value0_task.part1-value1")


def test_named_run_leaves_an_explicit_folder_alone():
    assert named_run(["loss=dapo"]) == ["loss=dapo", "variant='loss-dapo'"]
    assert named_run(["loss=dapo", "out=/tmp/x"]) == ["loss=dapo", "out=/tmp/x"]
    assert named_run(["variant=mine"]) == ["variant=mine"]


def test_each_distinct_run_gets_its_folder_with_its_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first, _ = prepare_run_dir(["loss=dapo", "batch.prompts=4"])
    second, _ = prepare_run_dir(["loss=gspo"])
    assert (first.as_posix(), second.as_posix()) == ("results/default/batch.prompts-4_loss-dapo",
                                                     "results/default/loss-gspo")
    assert prepare_run_dir(["batch.prompts=4", "loss=dapo"])[0] == first  # the same run: the same folder
    assert prepare_run_dir(["loss=dapo", "out=elsewhere"])[0].as_posix() == "elsewhere"
    assert yaml.safe_load((first / "overrides.yaml").read_text()) == ["batch.prompts=4", "loss=dapo"]
    versions = yaml.safe_load((second / "versions.yaml").read_text())
    assert list(versions) == ["command", "cwd", "rlscale", "git_commit", "python", *PACKAGES]
    assert versions["cwd"] == str(tmp_path) and versions["torch"] == package_version("torch") != ABSENT
    assert package_version("no-such-package-here") == ABSENT


def test_a_runs_log_lines_carry_its_name_in_its_train_log(tmp_path, caplog):
    log = logging.getLogger("rlscale.test")
    with run_logging(tmp_path, "sw/one", 4, progress_shown=True) as sinks:
        log.warning("first %d", 1)
        sinks[0].write({"step": 4, "kind": "eval", "val_reward": 0.5})
    with run_logging(tmp_path, "sw/one", 4, progress_shown=False) as sinks:  # a resume appends
        sinks[0].write({"step": 4, "kind": "eval", "val_reward": 0.5})
    log.warning("after the run")
    lines = (tmp_path / "train.log").read_text().splitlines()
    assert len(lines) == 3 and all("[sw/one]" in line for line in lines), lines
    assert lines[0].endswith("rlscale.test WARNING first 1")
    assert lines[1].endswith("rlscale.progress INFO train: step 4/4  val pass 0.500")
    shown = caplog.text  # what the process's own log handlers wrote, formatted by them
    assert shown.count("train: step 4/4") == 1  # there only where no progress display shows the steps
    assert "[sw/one] rlscale.test WARNING first 1" in shown and "[sw/one]" not in shown.splitlines()[-1]
