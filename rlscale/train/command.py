"""``rlscale run``: train one variant (any Hydra override), or resume a run directory."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def run_command(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. loss=gspo batch.prompts=8"),
    config_name: str = typer.Option("config", "--config-name", help="config.yaml (ScaleRL) or baseline"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="resume/train this run directory (its config.yaml)"),
    force: bool = typer.Option(False, "--force", help="start the run directory over (deletes its metrics)"),
) -> None:
    """Train one variant and write its run directory (config.yaml, metrics.jsonl, status.json)."""
    from rlscale.config import ConfigError
    from rlscale.results.names import printable
    from rlscale.results.status import read_status
    from rlscale.train.entry import prepare_run_dir, start_over, train_run_dir

    if run_dir is None:
        try:
            run_dir = prepare_run_dir(overrides or [], config_name, force)
        except ConfigError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2)
    elif not (run_dir / "config.yaml").exists():
        typer.echo(f"error: --run-dir {printable(run_dir)}: no config.yaml there", err=True)
        raise typer.Exit(2)
    elif force:
        start_over(run_dir)
    state = train_run_dir(run_dir)
    reason = read_status(run_dir).get("reason") if state != "done" else ""
    typer.echo(printable(f"{run_dir}: {state}" + (f": {reason}" if reason else "")))
    raise typer.Exit(0 if state == "done" else 1)
