"""``rlscale run``: train one variant (any Hydra override), or resume a run directory; Hydra's idioms
``--cfg job|hydra``, ``--info``, ``--config-dir`` and ``-m/--multirun`` (a grid sweep)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from rlscale.engines.memory import DEFAULT_PROMPT_TOKENS
from rlscale.options import choices
from rlscale.paths import CONFIG_DIR_HELP


CONFIG_PARTS = ("job", "hydra")


def run_command(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. loss=gspo batch.prompts=8"),
    config_name: str = typer.Option("config", "--config-name", help="config.yaml (ScaleRL) or baseline"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="resume/train this run directory (its config.yaml); "
                                            "trainer.max_steps=N as the one override extends it"),
    force: bool = typer.Option(False, "--force", help="start the run directory over (deletes its metrics)"),
    config_dir: Optional[Path] = typer.Option(None, "--config-dir", help=CONFIG_DIR_HELP),
    cfg: Optional[str] = typer.Option(None, "--cfg", metavar=choices(CONFIG_PARTS), help="print the composed config (job) or Hydra's "
                                             "own node (hydra) and exit"),
    info: bool = typer.Option(False, "--info", help="print the config search path and the config groups, and exit"),
    multirun: bool = typer.Option(False, "-m", "--multirun", help="comma-separated values (loss=cispo,dapo) "
                                  "make a grid sweep (--name, under --results), run as rlscale sweep"),
    name: str = typer.Option("multirun", "--name", help="with -m: the grid sweep's name"),
    results: Path = typer.Option(Path("results"), "--results", help="with -m: results root"),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="with -m: N runs of every cell (seed=0..N-1)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="with -m: write the configs, submit nothing"),
) -> None:
    """Train one variant and write its run directory (config.yaml, metrics.jsonl, status.json)."""
    from rlscale.config import ConfigError, load_run_config, typed
    from rlscale.paths import add_config_dir
    from rlscale.runfolder.names import printable
    from rlscale.runfolder.status import read_status
    from rlscale.train.entry import extend_run, finished, prepare_run_dir, requested_steps, start_over, train_run_dir

    if config_dir is not None:
        add_config_dir(config_dir)
    try:
        if cfg is not None and cfg not in CONFIG_PARTS:
            raise ConfigError(f"--cfg must be one of {', '.join(CONFIG_PARTS)} (got {cfg!r})")
        if info or cfg is not None:
            typer.echo(_describe(overrides or [], config_name, cfg), nl=False)
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


def _describe(overrides: List[str], config_name: str, part: Optional[str]) -> str:
    from omegaconf import OmegaConf

    from rlscale.config import compose_run_config
    from rlscale.config.compose import compose_raw
    from rlscale.paths import config_dirs, sweep_dirs

    if part == "job":
        return OmegaConf.to_yaml(compose_run_config(overrides, config_name))
    if part == "hydra":
        return OmegaConf.to_yaml(compose_raw(overrides, config_name).hydra)
    lines = ["Config search path (first match wins):", *(f"  {d}" for d in config_dirs()),
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
                      only=None, prune=False, resume_pruned=False, config_dir=None, list_specs=False, sbatch_dir=None,
                      prompt_tokens=DEFAULT_PROMPT_TOKENS)
    except typer.Exit as refused:
        if new and refused.exit_code == 2:  # the grid did not validate: its spec goes too
            spec.unlink(missing_ok=True)
        raise
