"""SLURM options from a run's ``launcher`` config, and the plain sbatch script of a run.

The same options feed submitit's job arrays and the generated ``slurm/<sweep>/<run>.sbatch`` scripts
(rendered from ``slurm/run.sbatch.tmpl``), so both paths ask SLURM for the same resources and run the
same job body: train (or resume) the run directory. Every value that reaches a script is shell-quoted
(the template's finalizer quotes every expression) but the ``launcher.setup`` lines, which are the user's own
shell, run as written; values that land on ``#SBATCH`` lines must also be free of control characters, since
a newline there would end the comment and start a command.
"""
from __future__ import annotations

import dataclasses
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple, Union

import jinja2
from omegaconf import DictConfig, OmegaConf

from rlscale.paths import SLURM_DIR
from rlscale.sweep.launchers import LauncherConfig, SlurmConfig
from rlscale.sweep.resolve import ResolvedRun
from rlscale.sweep.spec import SpecError, single_line

TEMPLATE = SLURM_DIR / "run.sbatch.tmpl"
OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")

OptionValue = Union[str, int, bool]


def job_tasks(launcher: DictConfig) -> int:
    """The tasks of one run's job, ``launcher.nodes`` x ``launcher.tasks_per_node``: its trainer ranks and its
    generator tasks (``launcher.generator_tasks``, the last ones)."""
    return int(launcher.nodes) * int(launcher.tasks_per_node)


def sbatch_options(launcher: DictConfig) -> Dict[str, OptionValue]:
    """sbatch options (underscore names, as submitit takes them) of a launcher=slurm section (``as_slurm``): partition,
    account, qos, the job's shape (nodes, tasks per node), GPUs, CPUs (per task), memory (per node), time limit,
    then ``extra_sbatch`` (which may override them)."""
    options: Dict[str, OptionValue] = {
        "time": int(launcher.timeout_min),  # minutes; submitit also reads it as the job's time limit
        "nodes": int(launcher.nodes),
        "ntasks_per_node": int(launcher.tasks_per_node),
        "cpus_per_task": int(launcher.cpus_per_task),
        "mem": f"{math.ceil(float(launcher.mem_gb) * 1024)}M",
    }
    for key in ("partition", "account", "qos"):
        if launcher[key]:
            options[key] = single_line(str(launcher[key]), f"launcher.{key}")
    if launcher.gpus_per_node:
        options["gpus_per_node"] = int(launcher.gpus_per_node)
    for key, value in OmegaConf.to_container(launcher.extra_sbatch).items():
        where = f"launcher.extra_sbatch.{key}"
        if not OPTION_NAME.fullmatch(str(key)):
            raise SpecError(f"{where}: {key!r} is not an sbatch option name")
        if value is False or value is None:
            continue
        if not isinstance(value, (str, int, float, bool)):
            raise SpecError(f"{where}: must be a string, a number or true, got {value!r}")
        options[str(key).replace("-", "_")] = True if value is True else single_line(str(value), where)
    return options


class ShellLine(str):
    """A line the user wrote as shell (``launcher.setup``): emitted as written, never quoted."""


def setup_commands(launcher: DictConfig) -> List[ShellLine]:
    """``launcher.setup``: shell lines run before the job, as written (``module load ...``, ``source
    ~/venv/bin/activate``, ``export X=${SCRATCH:-$HOME}/y && cd ...``): the user's own shell, like a line of their
    sbatch script. Each must be one line that bash parses without a warning (so no here-document, which would
    read the job body as its text) and that does not end in a backslash (which would join the next line to it);
    the script holds them between ``set +u`` and ``set -u`` (a variable they read may be unset, as in a plain
    script) and ``render_sbatch`` parses the whole script once more. Every other value of a script stays
    quoted."""
    lines = []
    for index, line in enumerate(launcher.setup):
        where = f"launcher.setup[{index}]"
        text = single_line(str(line), where).strip()
        if not text:
            continue
        _parse_or_refuse(text, where)  # a here-document on one line is unterminated: bash -n warns
        if re.search(r"(?<!\\)(\\\\)*\\$", text):
            raise SpecError(f"{where}: ends with a backslash, which would join the next line of the script to it: "
                            f"{text!r}")
        lines.append(ShellLine(text))
    return lines


def _parse_or_refuse(text: str, where: str, shown: bool = True) -> None:
    """``bash -n`` on ``text``; an error or a warning raises SpecError naming ``where`` (and quoting ``text``
    when ``shown``)."""
    check = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True, timeout=30)
    if check.returncode != 0 or check.stderr.strip():
        detail = " ".join(check.stderr.split()).replace("bash: -c: ", "")
        raise SpecError(f"{where}: not a shell line ({detail})" + (f": {text!r}" if shown else ""))


def as_slurm(launcher: DictConfig) -> DictConfig:
    """The SLURM section of a run: its ``launcher`` with launcher=slurm, else SLURM's defaults
    (``rlscale.sweep.launchers.SlurmConfig``) with the knobs both launchers have (the job's shape, time limit,
    setup), which the sbatch script that a dry run writes for every run asks for."""
    if launcher.name == "slurm":
        return launcher
    shared = {f.name for f in dataclasses.fields(LauncherConfig)} - {"name"}
    return OmegaConf.merge(OmegaConf.structured(SlurmConfig),
                           {key: value for key, value in OmegaConf.to_container(launcher).items() if key in shared})


def check_launcher(launcher: DictConfig) -> None:
    """Raise ``SpecError`` if the launcher config cannot be turned into SLURM options."""
    sbatch_options(as_slurm(launcher))
    setup_commands(launcher)


def render_sbatch(run: ResolvedRun, sweep: str) -> str:
    """The sbatch script of ``run`` (run it with plain ``sbatch``)."""
    launcher = as_slurm(run.cfg.launcher)
    run_dir = str(run.run_dir)  # the results root is single-line (resolve.results_root), the names safe
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False,
                             finalize=lambda value: value if isinstance(value, ShellLine) else shlex.quote(str(value)))
    template = env.from_string(TEMPLATE.read_text())
    options: List[Tuple[str, OptionValue]] = [(k.replace("_", "-"), v) for k, v in sbatch_options(launcher).items()]
    script = template.render(sweep=sweep, job_name=f"rlscale-{sweep}-{run.run.name}", log=f"{run_dir}/slurm-%j.out",
                             signal_delay_s=int(launcher.signal_delay_s), options=options,
                             setup=setup_commands(launcher), python=sys.executable, run_dir=run_dir,
                             srun=job_tasks(launcher) > 1)
    _parse_or_refuse(script, "launcher.setup (parsed with the job body)", shown=False)
    return script


def script_path(sweep: str, run_name: str, root: Path) -> Path:
    """Where ``--dry-run`` writes a run's script: ``<root>/<sweep>/<run>.sbatch`` (``root`` is ``--sbatch-dir``,
    by default ``slurm/`` beside the results root)."""
    return root / sweep / f"{run_name}.sbatch"
