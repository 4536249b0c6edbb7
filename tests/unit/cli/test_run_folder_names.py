"""A folder per distinct ``rlscale run``: named after its overrides (sorted, so any order finds the same folder,
cut with a hash when long), placed by ``out=``/``variant=`` when given, with overrides.yaml and versions.yaml
beside config.yaml, and the run's log lines in its train.log, each carrying its name."""
from __future__ import annotations

import logging

import yaml

from rlscale.runfolder.names import name_problem, run_name
from rlscale.train.entry import named_run, prepare_run_dir
from rlscale.tracking.progress import WARMING_UP, ProgressBar
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
        sinks[0].started()
        log.warning("first %d", 1)
        sinks[0].write({"step": 4, "kind": "eval", "val_reward": 0.5})
    with run_logging(tmp_path, "sw/one", 4, progress_shown=False) as sinks:  # a resume appends
        sinks[0].started()
        sinks[0].write({"step": 4, "kind": "eval", "val_reward": 0.5})
    log.warning("after the run")
    lines = (tmp_path / "train.log").read_text().splitlines()
    assert len(lines) == 5 and all("[sw/one]" in line for line in lines), lines
    assert lines[0].endswith(f"rlscale.progress INFO train: {WARMING_UP}") and lines[0][-50:] == lines[3][-50:]
    assert lines[1].endswith("rlscale.test WARNING first 1")
    assert lines[2].endswith("rlscale.progress INFO train: step 4/4  val pass 0.500")
    shown = caplog.text  # what the process's own log handlers wrote, formatted by them
    assert shown.count("train: step 4/4") == 1  # there only where no progress display shows the steps
    assert "[sw/one] rlscale.test WARNING first 1" in shown and "[sw/one]" not in shown.splitlines()[-1]


def test_log_lines_are_drawn_above_the_progress_bar(tmp_path, capsys):
    """With a progress bar, the process's log lines go through rich's handler on the bar's console (never a plain
    write to stderr that would cut the bar), with the run's name; matplotlib's font manager says nothing; the bar
    says it is warming up until the first update."""
    import io

    from rich.console import Console
    from rich.logging import RichHandler

    out = io.StringIO()
    console = Console(file=out, width=200)
    bar = ProgressBar("sw/one", 4, console=console)
    with run_logging(tmp_path, "sw/one", 4, progress_shown=True, console=console) as sinks:
        sinks.append(bar)
        bar.write({"step": 0, "kind": "eval", "val_reward": 0.2})
        assert bar.progress.tasks[0].fields["rewards"].startswith(WARMING_UP)
        logging.getLogger("rlscale.train").warning("step 1: truncation rate 11%")
        logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
        bar.write({"step": 1, "kind": "train", "reward": 0.1})
        assert bar.progress.tasks[0].fields["rewards"] == "train reward (+-1) 0.100  val pass 0.200"
        bar.close()
    shown = out.getvalue()
    assert "[sw/one] rlscale.train step 1: truncation rate 11%" in shown and "WARNING" in shown
    assert "fontManager" not in shown and "fontManager" not in (tmp_path / "train.log").read_text()
    assert capsys.readouterr().err == ""
    assert not any(isinstance(h, RichHandler) for h in logging.getLogger().handlers)  # the block's alone
