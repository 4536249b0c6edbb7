"""Generated sbatch scripts: SLURM options from the launcher config; no value that reaches a script (run
directory, launcher fields, names) is ever executed by the shell, while the ``launcher.setup`` lines run as the
shell lines they are."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.sweep.resolve import hydra_quote

EVIL = "$(touch {m}) `touch {m}` \"dq\" 'sq' ; touch {m}"
SETUP = 'export RLSCALE_PROBE="$HOME/venv" && echo "probe=$RLSCALE_PROBE"'  # what a venv activation line needs


def sweep(*args: str):
    return CliRunner().invoke(app, ["sweep", *args])


def test_launcher_config_becomes_sbatch_options(workdir):
    result = sweep("conf=loo", "launcher=slurm", "launcher.partition=gpu", "launcher.account=proj",
                   "launcher.qos=high", "launcher.gpus_per_node=2", "launcher.cpus_per_task=8",
                   "launcher.mem_gb=32", "launcher.timeout_min=240",
                   "+launcher.extra_sbatch.constraint=h100", "+launcher.extra_sbatch.exclusive=true", "--seeds", "1",
                   "--dry-run")
    assert result.exit_code == 0, result.output
    script = (workdir / "slurm/loo/bf16_head.sbatch").read_text()
    run_dir = (workdir / "results/loo/bf16_head").resolve()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=proj", "#SBATCH --qos=high",
                 "#SBATCH --gpus-per-node=2", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32768M",
                 "#SBATCH --time=240", "#SBATCH --constraint=h100", "#SBATCH --exclusive", "#SBATCH --requeue",
                 "#SBATCH --signal=B:USR2@60", f"#SBATCH --output={run_dir}/slurm-%j.out",
                 f"-m rlscale.train {run_dir} &"):
        assert line in script.splitlines() or any(l.endswith(line) for l in script.splitlines()), line
    assert json.loads((workdir / "results/loo/sweep.json").read_text())["launcher"] == "slurm"


def test_script_values_are_quoted_and_never_executed(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    evil = EVIL.format(m=marker)
    results = tmp_path / f"res {evil}"
    monkeypatch.chdir(tmp_path)
    result = sweep("conf=loo", "launcher=slurm", f"launcher.partition={hydra_quote(evil)}",
                   f"+launcher.extra_sbatch.comment={hydra_quote(evil)}", f"launcher.setup=[{hydra_quote(SETUP)}]",
                   f"length.phrase={hydra_quote(evil)}", "--results", str(results), "--seeds", "1", "--dry-run",
                   "--sbatch-dir", str(tmp_path / "slurm"))
    assert result.exit_code == 0, result.output
    script_path = tmp_path / "slurm/loo/scalerl.sbatch"
    script = script_path.read_text()
    assert "--partition='$(touch" in script and "--comment='$(touch" in script
    assert subprocess.run(["bash", "-n", str(script_path)]).returncode == 0
    # run the whole script with bash: the setup line runs as shell ($HOME expands); without config.yaml the trainer
    # entry exits at once with its usage error (2), so nothing trains
    run_dir = results.resolve() / "loo" / "scalerl"
    (run_dir / "config.yaml").unlink()
    ran = subprocess.run(["bash", str(script_path)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2, ran.stderr
    assert f"probe={os.environ['HOME']}/venv" in ran.stdout and f"{run_dir}: no config.yaml" in ran.stderr
    assert SETUP in script.splitlines()  # as written
    assert not marker.exists()


def test_a_setup_line_bash_cannot_parse_is_one_line(workdir):
    result = sweep("conf=loo", "launcher=slurm", f"launcher.setup=[{hydra_quote('source (oops')}]", "--dry-run")
    assert result.exit_code == 2 and "launcher.setup[0]: not a shell line" in result.output, result.output
    assert not (workdir / "results").exists()


def test_newline_in_a_script_value_is_rejected(workdir):
    marker = workdir / "pwned"
    result = sweep("conf=loo", "launcher=slurm",
                   f"+launcher.extra_sbatch.comment={hydra_quote(f'x' + chr(10) + f'touch {marker}')}",
                   "--dry-run")
    assert result.exit_code == 2
    assert "launcher.extra_sbatch.comment" in result.output and "control character" in result.output
    assert not (workdir / "results").exists() and not (workdir / "slurm").exists() and not marker.exists()


@pytest.mark.parametrize("name", ["$(touch {m})", "`touch {m}`", "a'b", "a\"b", "a\nb", "../up"])
def test_unsafe_variant_names_are_rejected(workdir, name):
    marker = workdir / "pwned"
    spec = workdir / "evil.yaml"
    spec.write_text(yaml.safe_dump({"name": "evil", "kind": "list", "base": {"name": "scalerl"},
                                    "variants": {name.format(m=marker): ["loss=dapo"]}}))
    result = sweep(f"conf={spec}")
    assert result.exit_code == 2 and "must match [A-Za-z0-9]" in result.output
    assert not (workdir / "results").exists() and not marker.exists()


def test_newline_in_the_results_path_is_rejected(workdir):
    result = sweep("conf=loo", "--results", str(workdir / "res\ntouch pwned"), "--dry-run")
    assert result.exit_code == 2 and "--results" in result.output and "control character" in result.output
    assert not list(workdir.iterdir())


@pytest.mark.parametrize("line, says", [("cat <<EOF", "here-document at line 1 delimited by end-of-file"),
                                        ("module load cuda \\", "ends with a backslash"),
                                        ('export X="unclosed', "unexpected EOF while looking for matching")])
def test_a_setup_line_that_would_swallow_the_job_body_is_one_line(workdir, line, says):
    result = sweep("conf=loo", "launcher=slurm", f"launcher.setup=[{hydra_quote(line)}, 'echo after']", "--dry-run")
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert "launcher.setup[0]" in errors[0] and says in result.output
    assert not (workdir / "results").exists() and not (workdir / "slurm").exists()


def test_the_documented_setup_example_runs_with_its_variable_unset(workdir):
    """docs/commands.md's `export HF_HOME=...` example, as written there, in a generated script run by bash with
    SCRATCH unset: the line falls back to $HOME/hf and the job body still runs (its trainer exits 2 at once on
    the missing config.yaml)."""
    docs = (Path(__file__).parents[3] / "docs" / "commands.md").read_text()
    example = re.search(r"`(export HF_HOME=[^`]*)`", docs).group(1)
    assert "${SCRATCH:-" in example  # an unset SCRATCH has a fallback
    result = sweep("conf=loo", "launcher=slurm", "--seeds", "1", "--dry-run",
                   f"launcher.setup=[{hydra_quote(example)}, 'echo hf=$HF_HOME']")
    assert result.exit_code == 0, result.output
    script = workdir / "slurm/loo/scalerl.sbatch"
    (workdir / "results/loo/scalerl/config.yaml").unlink()
    env = {k: v for k, v in os.environ.items() if k != "SCRATCH"}
    ran = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert f"hf={os.environ['HOME']}/hf" in ran.stdout.splitlines(), ran.stdout + ran.stderr
    assert ran.returncode == 2 and "no config.yaml" in ran.stderr


def test_shell_expansions_in_setup_survive_config_yaml(tmp_path):
    """A setup line's ${VAR:-x} is the shell's: composed, written to config.yaml and loaded again, it is the
    text the user wrote (OmegaConf would otherwise read it as an interpolation and fail)."""
    from omegaconf import OmegaConf

    from rlscale.config.compose import compose_run_config, load_run_config

    line = "export HF_HOME=${SCRATCH:-$HOME}/hf"
    cfg = compose_run_config([f"launcher.setup=[{hydra_quote(line)}, {hydra_quote('cd $HOME')}]"])
    assert list(cfg.launcher.setup) == [line, "cd $HOME"]
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(cfg))
    assert list(load_run_config(path).launcher.setup) == [line, "cd $HOME"]
