"""Generated sbatch scripts: SLURM options from the launcher config; no value that reaches a script (run
directory, launcher fields, names) is ever executed by the shell, while the ``launcher.setup`` lines run as the
shell lines they are."""
from __future__ import annotations

import json
import os
import subprocess

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
