"""Fault injection: every fault below ends in one line naming the path, field or option at fault, or is
survived with the data intact; nothing already written is lost or doubled.

Runs of the real trainer are tiny (3 updates of 2 prompts x 2 generations, a 2-step warm-up) and are
trained once per module, then copied. The full disk is a real 1 MiB tmpfs when the tests run as root
(else skipped), and also a simulation (a write raising ENOSPC) that runs everywhere; the read-only
folder is a tmpfs remounted read-only as root, else a folder without write permission.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run
from rlscale.runfolder.lock import LOCK_FILE, FolderLock
from rlscale.runfolder.metrics import read_metrics

TINY = ["model.warmup_steps=2", "trainer.max_steps=3", "trainer.eval_every=1", "trainer.checkpoint_every=1",
        "task.val_size=4", "task.train_size=16", "trainer.eval_samples=1", "batch.prompts=2", "batch.generations=2",
        "offpolicy=ppo", "offpolicy.batches_per_version=1", "engine.threads=1"]


def cli(*args) -> "CliRunner.invoke":
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})


def one_line_error(result, *words: str) -> str:
    """The command's output is one line holding every word, and no traceback."""
    out = result.output.strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    for word in words:
        assert word in out, out
    return out


def rlscale(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlscale.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, **kw)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache) -> Path:
    """A finished tiny run (status done, checkpoint at step 3)."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    done = rlscale("run", f"out={run_dir}", f"cache_dir={cache}", *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir


@pytest.fixture
def finished(trained, tmp_path) -> Path:
    copy = tmp_path / "results" / "sw" / "run"
    shutil.copytree(trained, copy)
    return copy


def synthetic_results(root: Path, names=("good", "other")) -> Path:
    for index, name in enumerate(names):
        x, y = synthetic_curve(TABLE1["scalerl"], 20, 0.01, np.random.default_rng(index))
        write_run(root / "sw" / name, x, y, seed=0)
    return root


def state_of(run_dir: Path) -> str:
    return json.loads((run_dir / "status.json").read_text())["state"]


# -- 1. a missing or unreadable checkpoint never deletes metrics ------------------------------------------------

@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_resume_without_a_usable_checkpoint_refuses_and_keeps_everything(finished, damage):
    metrics = (finished / "metrics.jsonl").read_bytes()
    checkpoint = finished / "checkpoints" / "last.pt"
    if damage == "missing":
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    result = cli("run", "--run-dir", finished)
    assert result.exit_code == 1
    one_line_error(result, str(checkpoint), "metrics.jsonl kept" if damage == "truncated" else "nothing deleted")
    assert (finished / "metrics.jsonl").read_bytes() == metrics
    assert state_of(finished) == "done"


def test_a_run_killed_before_its_first_checkpoint_starts_over(finished, cache):
    shutil.rmtree(finished / "checkpoints")
    step0 = [line for line in (finished / "metrics.jsonl").read_text().splitlines() if json.loads(line)["step"] == 0]
    (finished / "metrics.jsonl").write_text("\n".join(step0) + "\n" + step0[0][:20])  # and a torn line
    done = rlscale("run", "--run-dir", finished)
    assert done.returncode == 0, done.stderr
    records, warnings = read_metrics(finished / "metrics.jsonl")
    assert not warnings and [r["step"] for r in records if r["kind"] == "eval"] == [0, 1, 2, 3]


# -- 2. one writer per run folder and per sweep folder ---------------------------------------------------------

def hold_lock(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder``'s lock until killed."""
    code = ("import sys, time; from rlscale.runfolder.lock import FolderLock\n"
            "with FolderLock(sys.argv[1], 'test'):\n print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_run_on_a_held_run_folder_refuses_naming_the_holder(finished):
    (finished / "status.json").write_text(json.dumps({"state": "failed", "reason": "x"}))
    before = (finished / "metrics.jsonl").read_bytes()
    holder = hold_lock(finished)
    try:
        result = cli("run", "--run-dir", finished)
        assert result.exit_code == 1
        one_line_error(result, str(finished), f"pid {holder.pid}", "in use")
        assert (finished / "metrics.jsonl").read_bytes() == before and state_of(finished) == "failed"
    finally:
        holder.kill()
        holder.wait()
    with FolderLock(finished, "test") as lock:  # the dead holder's lock is taken over, and said so
        assert lock.took_over["pid"] == holder.pid


def test_an_extension_of_a_held_run_folder_refuses_and_changes_nothing(finished):
    """``--run-dir D trainer.max_steps=N`` while D trains: refused in one line before config.yaml is touched."""
    holder = hold_lock(finished)
    before = snapshot(finished)
    try:
        result = cli("run", "--run-dir", finished, "trainer.max_steps=14")
        assert result.exit_code == 1
        one_line_error(result, str(finished), f"pid {holder.pid}", "in use")
        assert snapshot(finished) == before
    finally:
        holder.kill()
        holder.wait()


def test_a_sweep_job_leaves_a_held_run_alone(finished):
    from rlscale.sweep.job import RunJob

    (finished / "status.json").write_text(json.dumps({"state": "running", "reason": "", "pid": 1}))
    holder = hold_lock(finished)
    try:
        with pytest.raises(RuntimeError, match="failed runs: run"):
            RunJob(run_dirs=(finished,))()
        assert json.loads((finished / "status.json").read_text())["pid"] == 1  # untouched
    finally:
        holder.kill()
        holder.wait()


def write_spec(folder: Path, variants: dict, name: str = "mini") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "kind": "list", "base": {"name": "base"}, "overrides": TINY,
                                    "variants": variants}, sort_keys=False))
    return path


def test_a_second_sweep_on_a_held_sweep_folder_refuses_and_writes_nothing(workdir):
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    holder = hold_lock(workdir / "results" / "mini")
    try:
        result = cli("sweep", f"conf={spec}", "--dry-run")
        assert result.exit_code == 1
        one_line_error(result, "sweep folder in use", f"pid {holder.pid}")
        assert not (workdir / "results" / "mini" / "sweep.json").exists()
    finally:
        holder.kill()
        holder.wait()
    assert cli("sweep", f"conf={spec}", "--dry-run").exit_code == 0  # the stale lock is taken over


def test_a_sweep_skips_a_run_folder_another_process_trains(workdir):
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    assert cli("sweep", f"conf={spec}", "--dry-run").exit_code == 0
    run_dir = workdir / "results" / "mini" / "dapo"
    mine = json.dumps({"state": "running", "reason": "", "pid": 1})
    (run_dir / "status.json").write_text(mine)
    holder = hold_lock(run_dir)
    try:
        assert cli("sweep", f"conf={spec}", "--dry-run").exit_code == 0
        assert (run_dir / "status.json").read_text() == mine  # not reset to pending
        forced = cli("sweep", f"conf={spec}", "--dry-run", "--force")
        assert forced.exit_code == 2
        one_line_error(forced, str(run_dir), f"pid {holder.pid}", "stop it before --force")
    finally:
        holder.kill()
        holder.wait()


# -- 3, 4. bad metrics lines are isolated, and cost bounded time, memory and message --------------------------

BAD_LINES = ['{"step": "30", "kind": "eval", "gpu_hours": 5, "val_reward": 0.5}',
             '{"step": [1], "kind": "eval", "gpu_hours": 5, "val_reward": 0.5}',
             '{"step": 31, "kind": ["eval"], "gpu_hours": 5, "val_reward": 0.5}',
             '{"step": 32, "kind": "eval", "gpu_hours": "9", "val_reward": {"a": 1}}',
             '{"step": true, "kind": "eval"}']


def test_one_bad_value_never_stops_fit_status_or_report_for_the_others(tmp_path):
    root = synthetic_results(tmp_path / "results", ("good", "bad"))
    with open(root / "sw" / "bad" / "metrics.jsonl", "a") as fh:
        fh.write("\n".join(BAD_LINES) + "\n")
    fit = cli("fit", root, "--n-boot", "0")
    assert fit.exit_code == 0 and "Traceback" not in fit.output, fit.output
    fits = {r["variant"]: r for r in json.loads((root / "fits.json").read_text())["runs"]}
    assert fits["good"]["status"] == "ok" and fits["bad"]["status"] == "repaired"
    assert "non-integer 'step'" in fits["bad"]["message"] and "non-string 'kind'" in fits["bad"]["message"]
    assert fits["bad"]["A"] == pytest.approx(fits["good"]["A"], abs=0.05)  # same truth, different noise
    status = cli("status", root)
    assert status.exit_code == 0 and "bad" in status.output and "Traceback" not in status.output
    report = cli("report", root)
    assert report.exit_code == 0 and "Traceback" not in report.output, report.output


def test_a_large_junk_metrics_file_gives_a_bounded_message(tmp_path):
    import tracemalloc

    root = synthetic_results(tmp_path / "results", ("good", "junk"))
    rng = np.random.default_rng(0)
    clean, _ = read_metrics(root / "sw" / "junk" / "metrics.jsonl")
    with open(root / "sw" / "junk" / "metrics.jsonl", "ab") as fh:
        for _ in range(20):  # 20 MiB: random bytes with newlines, then one 4 MiB line without any
            fh.write(rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
        fh.write(b"{" * (4 << 20) + b"\n")
    tracemalloc.start()
    records, warnings = read_metrics(root / "sw" / "junk" / "metrics.jsonl")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20, peak  # streamed: a few 1 MiB line buffers, not the file
    assert records == clean and sum(map(len, warnings)) < 600 and len(warnings) <= 5
    fit = cli("fit", root, "--n-boot", "0")
    assert fit.exit_code == 0 and len(fit.output) < 20000, fit.output[-2000:]
    fits = {r["variant"]: r for r in json.loads((root / "fits.json").read_text())["runs"]}
    assert fits["junk"]["status"] == "repaired" and len(fits["junk"]["message"]) < 600
    assert "unparseable lines skipped (first at lines" in fits["junk"]["message"]
    html = cli("report", "--html", root)
    assert html.exit_code == 0 and (root / "report.html").stat().st_size < 3 << 20


# -- 5. launcher fields and submission failures ----------------------------------------------------------------

@pytest.mark.parametrize("override", ["launcher.cpus_per_task=0", "launcher.mem_gb=-2", "launcher.timeout_min=0",
                                      "launcher.signal_delay_s=-1", "launcher.gpus_per_node=-1"])
def test_bad_launcher_fields_fail_before_anything_is_written(workdir, override):
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    result = cli("sweep", f"conf={spec}", "launcher=slurm", override, "--dry-run")
    assert result.exit_code == 2
    one_line_error(result, f"field '{override.split('=')[0]}'")
    assert not (workdir / "results").exists() and not (workdir / "slurm").exists()


def test_a_failed_slurm_submission_marks_the_runs_failed(workdir, monkeypatch):
    """``sbatch`` here is a stand-in program that fails as a SLURM refusing the job would."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: nosuch' >&2\n"
                                    "exit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    result = cli("sweep", f"conf={spec}", "launcher=slurm", "--detach")
    assert result.exit_code == 1 and "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]  # after sbatch's own message, which submitit passes on
    assert last.startswith("error: ") and "submission failed" in last and "invalid partition" in last
    sweep_dir = workdir / "results" / "mini"
    for run in ("base", "dapo"):
        status = json.loads((sweep_dir / run / "status.json").read_text())
        assert status["state"] == "failed" and "invalid partition" in status["reason"]
    status = cli("status", sweep_dir)
    assert "pending" not in status.output and status.output.count("failed") >= 2


@pytest.mark.slurm
def test_a_real_slurm_refusing_the_array_marks_the_runs_failed(slurm_cluster, workdir):
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    result = cli("sweep", f"conf={spec}", "launcher=slurm", "launcher.partition=no_such_partition", "--detach")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("error: ")
    for run in ("base", "dapo"):
        status = json.loads((workdir / "results" / "mini" / run / "status.json").read_text())
        assert status["state"] == "failed" and "partition" in status["reason"]


# -- 6. status notices a dead standalone run --------------------------------------------------------------------

def test_status_shows_a_killed_run_as_failed(finished):
    (finished / "checkpoints" / "last.pt").unlink()
    (finished / "metrics.jsonl").unlink()
    config = yaml.safe_load((finished / "config.yaml").read_text())
    config["trainer"]["max_steps"] = 500
    (finished / "config.yaml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen([sys.executable, "-m", "rlscale.cli", "run", "--run-dir", str(finished)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not (finished / "checkpoints" / "last.pt").exists():
        time.sleep(0.5)
    assert state_of(finished) == "running"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = cli("status", finished.parent)
    assert result.exit_code == 0
    assert "failed" in result.output and f"process {proc.pid} gone" in result.output, result.output
    assert "running" not in result.output


# -- 7. duplicate keys in a sweep spec --------------------------------------------------------------------------

def test_duplicate_variant_keys_are_refused(workdir):
    spec = workdir / "dup.yaml"
    spec.write_text("name: dup\nkind: list\nbase: {name: base}\nvariants:\n  a: [loss=dapo]\n  a: [loss=gspo]\n")
    result = cli("sweep", f"conf={spec}", "--dry-run")
    assert result.exit_code == 2
    one_line_error(result, str(spec), "duplicate key 'a'", "line 6")
    assert not (workdir / "results").exists()


# -- 8. numbers range-checked where declared --------------------------------------------------------------------

@pytest.mark.parametrize("args, option", [(["--r0", "nan"], "--r0"), (["--margin", "nan"], "--margin"),
                                          (["--predict-at", "nan"], "--predict-at"),
                                          (["--min-compute", "nan"], "--min-compute"), (["--seed", "-1"], "--seed"),
                                          (["--ci", "inf"], "--ci"), (["--fit-until", "inf"], "--fit-until")])
def test_fit_numbers_out_of_range_are_usage_errors(tmp_path, args, option):
    root = synthetic_results(tmp_path / "results")
    result = cli("fit", root, *args)
    assert result.exit_code == 2
    one_line_error(result, option)
    assert not (root / "fits.json").exists()


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_temperature_must_be_a_finite_positive_number(workdir, value):
    result = cli("run", f"generation.temperature={value}", f"out={workdir / 'r'}")
    assert result.exit_code == 2
    one_line_error(result, "field 'generation.temperature'")
    assert not (workdir / "r").exists()


# -- 9. one line instead of a traceback -------------------------------------------------------------------------

@pytest.fixture
def read_only(tmp_path):
    """A folder holding two synthetic runs and a run folder with a config, then made read-only."""
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)]).returncode == 0
    synthetic_results(folder)
    (folder / "sw" / "good" / "config.yaml").write_text("seed: 0\n")
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    elif os.geteuid() == 0:
        pytest.skip("root ignores permissions and cannot mount a read-only tmpfs here")
    else:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    yield folder
    if mounted:
        subprocess.run(["umount", str(folder)], check=True)
    else:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_read_only_results_folder(read_only, tmp_path, workdir):
    fit = cli("fit", read_only, "--n-boot", "0")
    assert fit.exit_code == 1
    assert fit.output.strip().splitlines()[-1].startswith(f"error: {read_only / 'fits.json'}")
    assert "Traceback" not in fit.output
    assert cli("fit", read_only, "--n-boot", "0", "--out", tmp_path / "fits").exit_code == 0
    report = cli("report", read_only)
    assert report.exit_code == 0 and "fits not saved" in report.output, report.output
    html = cli("report", read_only, "--out", tmp_path / "page.html")
    assert html.exit_code == 0 and (tmp_path / "page.html").exists(), html.output
    run = cli("run", "--run-dir", read_only / "sw" / "good")
    assert run.exit_code == 1
    one_line_error(run, str(read_only / "sw" / "good"))
    spec = write_spec(workdir, {"dapo": ["loss=dapo"]})
    sweep = cli("sweep", f"conf={spec}", "--dry-run", "--results", read_only)
    assert sweep.exit_code == 1
    one_line_error(sweep, str(read_only))


def test_report_out_elsewhere_does_not_write_into_the_results_folder(tmp_path):
    root = synthetic_results(tmp_path / "results")
    result = cli("report", root, "--out", tmp_path / "page.html")
    assert result.exit_code == 0 and (tmp_path / "page.html").exists()
    assert not (root / "fits.json").exists()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs: smaller than a checkpoint of the tiny model (1.4 MB)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_on_checkpoint_write_fails_the_run_in_one_line(trained, tiny_tmpfs):
    run_dir = tiny_tmpfs / "run"
    run_dir.mkdir()
    shutil.copy(trained / "config.yaml", run_dir / "config.yaml")
    result = rlscale("run", "--run-dir", run_dir)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{run_dir}: failed: {run_dir / 'checkpoints' / 'last.pt'}") and "no space left" in last
    assert state_of(run_dir) == "failed"
    records, _ = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [0]  # the step-0 eval is kept


def test_a_full_disk_simulated(monkeypatch, tmp_path):
    """Simulation: ``torch.save`` writes 4 KiB then the file system answers ENOSPC, as a full disk does."""
    from rlscale.train import checkpoint

    def full(state, fh):
        fh.write(b"\0" * 4096)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint.torch, "save", full)
    with pytest.raises(checkpoint.CheckpointError, match="last.pt: cannot write the checkpoint: no space left"):
        checkpoint.save_checkpoint(tmp_path, {"step": 1}, checkpoint.RunIdentity(config="", seed=0, run="run"))
    assert not list((tmp_path / "checkpoints").iterdir())  # no partial file left behind


@pytest.mark.parametrize("name, words", [("v" * 301, ["301 characters", "at most 128"]),
                                         ("sweep.json", ["'sweep.json' is reserved"])])
def test_unusable_variant_names_are_refused_before_anything_is_written(workdir, name, words):
    spec = write_spec(workdir, {name: ["loss=dapo"]})
    result = cli("sweep", f"conf={spec}", "--dry-run")
    assert result.exit_code == 2
    one_line_error(result, str(spec), *words)
    assert not (workdir / "results").exists()


def test_report_figures_on_a_file_and_out_on_a_folder(tmp_path):
    root = synthetic_results(tmp_path / "results")
    (tmp_path / "a_file").write_text("x")
    figures = cli("report", root, "--figures", tmp_path / "a_file")
    assert figures.exit_code == 2
    one_line_error(figures, "--figures", "is a file")
    out = cli("report", root, "--out", tmp_path)
    assert out.exit_code == 2
    one_line_error(out, "--out", "is a folder")
    fit_out = cli("fit", root, "--out", tmp_path / "a_file")
    assert fit_out.exit_code == 2
    one_line_error(fit_out, "--out", "is a file")


# -- 10. names reach the terminal escaped; run's names are checked --------------------------------------------

def test_folder_names_are_shown_escaped(tmp_path):
    root = synthetic_results(tmp_path / "results", ("\x1b[31mred", "[bold]x"))
    for args in (["fit", root, "--n-boot", "0"], ["status", root], ["report", root]):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\\x1b[31mred" in result.output
        assert "[bold]x" in result.output, (args, result.output)


def test_the_report_page_writes_no_control_character_nor_undecodable_byte(tmp_path):
    """Folder names with CR, ESC and BEL and a byte that is not UTF-8: every field of the page (the folder,
    the ranking notes, the tables) shows them as \\x.. escapes, never as raw bytes or a \\udc.. surrogate."""
    root = synthetic_results(tmp_path / "results", ("a\rb\x1bc\x07d", os.fsdecode(b"bad\xffname")))
    assert cli("fit", root, "--n-boot", "0").exit_code == 0
    result = cli("report", root, "--html")
    assert result.exit_code == 0, result.output
    page = (root / "report.html").read_bytes()
    for raw in (b"\r", b"\x1b", b"\x07", b"\\udcff", b"\xed\xb3\xbf"):
        assert raw not in page, raw
    assert b"a\\x0db\\x1bc\\x07d" in page and b"bad\\xffname" in page
    assert page.count(b"\\xff") >= 2  # the folder field and the ranking row


def test_run_rejects_a_variant_that_would_leave_the_results_folder(workdir):
    result = cli("run", "variant=../../x")
    assert result.exit_code == 2
    one_line_error(result, "field 'variant'", "'../../x'")
    assert not list(workdir.parent.glob("x")) and not (workdir / "results").exists()


# -- 11. a run folder's own config and checkpoint, or a refusal that changes nothing -----------------------------

def snapshot(folder: Path) -> dict:
    """Every file under ``folder``: its bytes and modification time; the lock file only by its bytes (every
    taker writes its holder record there and clears it on release)."""
    return {path.relative_to(folder): (path.read_bytes(), None if path.name == LOCK_FILE else path.stat().st_mtime_ns)
            for path in sorted(folder.rglob("*")) if path.is_file()}


def extend(run_dir: Path, steps: int) -> None:
    """Raise ``trainer.max_steps`` in the run's config.yaml: the finished run has steps left to train."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["trainer"]["max_steps"] = steps
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def other_seed(tmp_path_factory, cache) -> Path:
    """A finished tiny run like ``trained`` but with seed 1, in a folder of the same name."""
    run_dir = tmp_path_factory.mktemp("other") / "run"
    done = rlscale("run", f"out={run_dir}", f"cache_dir={cache}", "seed=1", *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir


@pytest.mark.parametrize("damage", ["empty", "truncated", "a list"])
def test_an_unusable_config_yaml_is_refused_and_changes_nothing(finished, damage):
    config = finished / "config.yaml"
    text = config.read_text()
    cut = text.index("dataset_kwargs: {") + len("dataset_kwargs: {")
    config.write_text({"empty": "", "truncated": text[:cut], "a list": "- seed\n- 7\n"}[damage])
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished)
    assert result.exit_code != 0
    one_line_error(result, str(config))
    assert snapshot(finished) == before


def test_a_checkpoint_of_another_run_is_refused_and_changes_nothing(finished, other_seed):
    extend(finished, 4)
    checkpoint = finished / "checkpoints" / "last.pt"
    shutil.copy(other_seed / "checkpoints" / "last.pt", checkpoint)
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished)
    assert result.exit_code == 1
    one_line_error(result, f"{checkpoint} (step 3) belongs to another run (seed 1, not 0)")
    assert snapshot(finished) == before


def test_a_checkpoint_of_another_run_folder_is_refused(finished):
    copy = finished.parent / "copy"
    shutil.copytree(finished, copy)
    extend(copy, 4)
    result = cli("run", "--run-dir", copy)
    assert result.exit_code == 1
    one_line_error(result, str(copy / "checkpoints" / "last.pt"), "run folder 'run', not 'copy'")
    assert state_of(copy) == "done"


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory, cache) -> dict:
    """Checkpoints of another history of ``trained``'s run: the same config, seed and folder name, trained in
    another results folder; its checkpoint at step 3, then at step 5 (extended)."""
    run_dir = tmp_path_factory.mktemp("elsewhere") / "run"
    kept = tmp_path_factory.mktemp("elsewhere-checkpoints")
    done = rlscale("run", f"out={run_dir}", f"cache_dir={cache}", *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copy(run_dir / "checkpoints" / "last.pt", kept / "step3.pt")
    done = rlscale("run", "--run-dir", run_dir, "trainer.max_steps=5")
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copy(run_dir / "checkpoints" / "last.pt", kept / "step5.pt")
    return {3: kept / "step3.pt", 5: kept / "step5.pt"}


@pytest.mark.parametrize("step, words", [(5, "fewer than"), (3, "it was taken with")])
def test_a_checkpoint_of_another_history_of_the_run_is_refused(finished, elsewhere, step, words):
    """A checkpoint copied from another results folder whose run has the same config, seed and folder name:
    a later one (step 5) would leave steps 4-5 missing, the one of the same step another run's lines (their
    timings differ, so the sizes or the bytes do); both are refused before anything changes, and metrics.jsonl
    still ends at a line end."""
    extend(finished, 6)
    checkpoint = finished / "checkpoints" / "last.pt"
    shutil.copy(elsewhere[step], checkpoint)
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished)
    assert result.exit_code == 1
    one_line_error(result, f"{checkpoint} (step {step}) belongs to another history of this run",
                   str(finished / "metrics.jsonl"), words)
    assert snapshot(finished) == before
    assert (finished / "metrics.jsonl").read_bytes().endswith(b"\n")


def tensor_bytes(checkpoint: Path) -> int:
    """The offset of the largest tensor's data inside ``checkpoint`` (a torch.save zip)."""
    import zipfile

    with zipfile.ZipFile(checkpoint) as archive:
        info = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    with open(checkpoint, "rb") as fh:
        fh.seek(info.header_offset + 26)
        name, extra = (int.from_bytes(fh.read(2), "little") for _ in range(2))
    return info.header_offset + 30 + name + extra + info.file_size // 2


def test_a_damaged_checkpoint_is_refused_and_changes_nothing(finished):
    extend(finished, 4)
    checkpoint = finished / "checkpoints" / "last.pt"
    data = bytearray(checkpoint.read_bytes())
    at = tensor_bytes(checkpoint)
    data[at:at + 64] = bytes(b ^ 0xFF for b in data[at:at + 64])
    checkpoint.write_bytes(bytes(data))
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished)
    assert result.exit_code == 1
    one_line_error(result, str(checkpoint), "damaged checkpoint", "metrics.jsonl kept")
    assert snapshot(finished) == before


def test_rerunning_a_finished_run_touches_nothing(finished):
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished)
    assert result.exit_code == 0
    one_line_error(result, str(finished), "finished", "nothing to do")
    assert snapshot(finished) == before


@pytest.mark.parametrize("override, words", [
    ("trainer.max_steps=2", ["trainer.max_steps=2", "reached step 3", "can only grow"]),
    ("loss=dapo", ["'loss=dapo'", "takes only trainer.max_steps=N"]),
    ("trainer.max_steps=lots", ["'trainer.max_steps=lots'", "whole number"]),
    ("no checkpoint", ["trainer.max_steps=9", "no checkpoint to continue from", "--force"]),
])
def test_an_existing_run_takes_only_a_larger_step_count(finished, override, words):
    if override == "no checkpoint":
        (finished / "checkpoints" / "last.pt").unlink()
        override = "trainer.max_steps=9"
    before = snapshot(finished)
    result = cli("run", "--run-dir", finished, override)
    assert result.exit_code == 2
    one_line_error(result, *words)
    assert snapshot(finished) == before


def test_a_resume_removes_temporary_checkpoints_a_kill_left(finished):
    extend(finished, 4)
    stale = finished / "checkpoints" / ".last.pt.k1ll3d.tmp"
    shutil.copy(finished / "checkpoints" / "last.pt", stale)
    done = rlscale("run", "--run-dir", finished)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"removed {stale}" in done.stderr
    assert [p.name for p in (finished / "checkpoints").iterdir()] == ["last.pt"]
    assert json.loads((finished / "status.json").read_text())["step"] == 4


def test_a_disk_full_from_the_start_is_one_line_naming_the_file(trained, tiny_tmpfs):
    run_dir = tiny_tmpfs / "run"
    run_dir.mkdir()
    shutil.copy(trained / "config.yaml", run_dir / "config.yaml")
    with open(tiny_tmpfs / "filler", "wb", buffering=0) as fh:  # fill the file system to its last block
        while True:
            try:
                fh.write(b"\0" * 4096)
            except OSError:
                break
    result = rlscale("run", "--run-dir", run_dir)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    last = (result.stdout + result.stderr).strip().splitlines()[-1]
    assert str(run_dir) in last and "no space left" in last.lower(), last


def test_a_full_disk_on_a_metrics_append_fails_the_run_in_one_line(finished, monkeypatch, caplog):
    """Simulation: the file system refuses the metrics line (ENOSPC at fsync), as a full disk does."""
    from rlscale.runfolder import metrics
    from rlscale.train.entry import train_run_dir

    class FullDisk:  # the metrics module's os, whose fsync finds the disk full; every other write goes through
        def __getattr__(self, name):
            return getattr(os, name)

        def fsync(self, fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    extend(finished, 5)
    monkeypatch.setattr(metrics, "os", FullDisk())
    assert train_run_dir(finished) == "failed"
    reason = json.loads((finished / "status.json").read_text())["reason"]
    assert reason == f"{finished / 'metrics.jsonl'}: cannot append the step-4 line: no space left on device"
    assert not [r for r in caplog.records if r.exc_info]  # one line, no traceback
