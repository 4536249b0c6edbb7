"""``rlscale run``: train one variant (any Hydra override), or resume a run directory; Hydra's flags as Hydra
documents them: ``--cfg/-c job|hydra|all`` with ``--resolve`` and ``--package/-p``, ``--info/-i [PART]``,
``--config-dir/-cd``, ``--config-path/-cp``, ``--config-name/-cn`` and ``-m/--multirun`` (a grid sweep over
Hydra's sweep grammar). Without ``out=`` or ``variant=`` each distinct run gets its own folder, named after its
overrides (rlscale.runfolder.names.run_name)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from rlscale.config.show import CONFIG_PARTS, INFO_PARTS
from rlscale.engines.memory import DEFAULT_PROMPT_TOKENS
from rlscale.options import choices
from rlscale.paths import CONFIG_DIR_HELP, CONFIG_PATH_HELP

INFO_FLAGS = ("--info", "-i")


def optional_info(args: List[str]) -> List[str]:
    """``args`` with ``all`` after an ``--info``/``-i`` that has no part after it: Hydra's ``--info`` takes its
    argument optionally (argparse ``nargs='?'``, ``const='all'``)."""
    out: List[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg in INFO_FLAGS and (i + 1 == len(args) or args[i + 1] not in INFO_PARTS):
            out.append("all")
    return out


def run_command(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. loss=gspo batch.prompts=8"),
    config_name: str = typer.Option("config", "--config-name", "-cn", help="config.yaml (ScaleRL) or baseline"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="resume/train this run directory (its config.yaml); "
                                            "trainer.max_steps=N as the one override extends it"),
    force: bool = typer.Option(False, "--force", help="start the run directory over (deletes its metrics)"),
    config_dir: Optional[Path] = typer.Option(None, "--config-dir", "-cd", help=CONFIG_DIR_HELP),
    config_path: Optional[Path] = typer.Option(None, "--config-path", "-cp", help=CONFIG_PATH_HELP),
    cfg: Optional[str] = typer.Option(None, "--cfg", "-c", metavar=choices(CONFIG_PARTS), help="print the composed "
                                      "config (job), Hydra's own node (hydra) or both (all), and exit"),
    resolve: bool = typer.Option(False, "--resolve", help="with --cfg: resolve interpolations before printing"),
    package: Optional[str] = typer.Option(None, "--package", "-p", help="with --cfg: print this package only "
                                          "(e.g. loss, hydra.run)"),
    info: Optional[str] = typer.Option(None, "--info", "-i", metavar="[PART]",
                                       help=f"print Hydra's information on the composition, PART one of "
                                       f"{', '.join(INFO_PARTS)} (all when none is given; all ends with rlscale's "
                                       "groups and sweep spec search path), and exit"),
    multirun: bool = typer.Option(False, "-m", "--multirun", help="sweep values (loss=cispo,dapo, "
                                  "batch.prompts=range(4,12,4), loss=glob(c*), choice(...)) make a grid sweep "
                                  "(--name, under --results), run as rlscale sweep"),
    name: str = typer.Option("multirun", "--name", help="with -m: the grid sweep's name"),
    results: Path = typer.Option(Path("results"), "--results", help="with -m: results root"),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="with -m: N runs of every cell (seed=0..N-1)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="with -m: write the configs, submit nothing"),
) -> None:
    """Train one variant and write its run directory (config.yaml, metrics.jsonl, status.json, train.log,
    overrides.yaml, versions.yaml)."""
    from rlscale.config import ConfigError, load_run_config, typed
    from rlscale.paths import add_config_dir, set_config_path
    from rlscale.runfolder.names import printable
    from rlscale.runfolder.status import read_status
    from rlscale.train.entry import (as_written, extend_run, finished, named_run, prepare_run_dir, requested_steps,
                                     start_over, train_run_dir)

    if config_path is not None:
        set_config_path(config_path)
    if config_dir is not None:
        add_config_dir(config_dir)
    try:
        shown = [flag for flag, given in (("--resolve", resolve), ("--package", package is not None)) if given]
        if shown and cfg is None:
            raise ConfigError(f"{shown[0]} goes with --cfg job|hydra|all")
        if info is not None or cfg is not None:
            try:
                described = _describe(named_run(overrides or []), config_name, cfg, info, package, resolve,
                                      (results / name).as_posix())
            except ConfigError as err:
                raise as_written(err, overrides or []) from None
            typer.echo(described, nl=False)
            return
        grid_only = [flag for flag, given in (("--name", name != "multirun"), ("--results", results != Path("results")),
                                              ("--seeds", seeds is not None), ("--dry-run", dry_run)) if given]
        if grid_only and not multirun:
            raise ConfigError(f"{grid_only[0]} goes with -m (a grid sweep); one run's folder is out=DIR")
        if multirun:
            _multirun(overrides or [], config_name, force, name, results, seeds, dry_run)
            return
        if run_dir is None:
            run_dir, config = prepare_run_dir(overrides or [], config_name, force)
        else:
            if not (run_dir / "config.yaml").exists():
                raise ConfigError(f"--run-dir {printable(run_dir)}: no config.yaml there")
            config = load_run_config(run_dir / "config.yaml")  # refused before any write
            steps = requested_steps(run_dir, overrides or [])
            if force:
                start_over(run_dir)
            if steps is not None:
                config = extend_run(run_dir, config, steps)
        max_steps = int(config.trainer.max_steps)
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    if finished(run_dir, max_steps):
        typer.echo(printable(f"{run_dir}: finished (done at step {max_steps} of {max_steps}); nothing to do"))
        raise typer.Exit(0)
    state = train_run_dir(run_dir, progress=True, cfg=typed(config))
    reason = read_status(run_dir).get("reason") if state != "done" else ""
    typer.echo(printable(f"{run_dir}: {state}" + (f": {reason}" if reason else "")))
    raise typer.Exit(0 if state == "done" else 1)


def _describe(overrides: List[str], config_name: str, part: Optional[str], info: Optional[str],
              package: Optional[str], resolve: bool, sweep_dir: str) -> str:
    """``--cfg`` and ``--info`` (rlscale.config.show); ``--info all`` ends with rlscale's own summary."""
    from rlscale.config.show import info_text, shown_config

    if part is not None:
        return shown_config(overrides, config_name, part, package, resolve, sweep_dir)
    return info_text(info, overrides, config_name) + (_summary() if info == "all" else "")


def _summary() -> str:
    """The config search path, the sweep spec search path, every group's options and the root configs."""
    from rlscale.paths import config_dirs, sweep_dirs

    lines = ["", "rlscale", "*******", "Config search path (first match wins):", *(f"  {d}" for d in config_dirs()),
             "Sweep spec search path (conf=NAME):", *(f"  {d}" for d in sweep_dirs()), "Config groups:"]
    groups = sorted({p.name for d in config_dirs() for p in d.iterdir() if p.is_dir() and p.name != "sweeps"})
    for group in groups:
        options = sorted({p.stem for d in config_dirs() for p in (d / group).glob("*.yaml")})
        lines.append(f"  {group}: {', '.join(options)}")
    roots = sorted({p.stem for d in config_dirs() for p in d.glob("*.yaml")})
    lines.append(f"Root configs (--config-name): {', '.join(roots)}")
    return "\n".join(lines) + "\n"


def _multirun(overrides: List[str], config_name: str, force: bool, name: str, results: Path, seeds: Optional[int],
              dry_run: bool) -> None:
    from rlscale.cli.sweep import sweep_command
    from rlscale.sweep.multirun import write_multirun_spec
    from rlscale.sweep.spec import SpecError

    try:
        spec, new = write_multirun_spec(overrides, results, config_name, name, seeds)
    except SpecError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    try:
        sweep_command([f"conf={spec}"], seeds=seeds, dry_run=dry_run, detach=False, force=force, results=results,
                      only=None, prune=False, resume_pruned=False, config_dir=None, config_path=None, list_specs=False,
                      sbatch_dir=None, prompt_tokens=DEFAULT_PROMPT_TOKENS)
    except typer.Exit as refused:
        if new and refused.exit_code == 2:  # the grid did not validate: its spec goes too
            spec.unlink(missing_ok=True)
        raise
