"""``rlscale run``: train one variant (any Hydra override), or resume a run directory."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def run_command(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. loss=gspo batch.prompts=8"),
    config_name: str = typer.Option("config", "--config-name", help="config.yaml (ScaleRL) or baseline"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="resume/train this run directory (its config.yaml)"),
    force: bool = typer.Option(False, "--force", help="start the run directory over"),
) -> None:
    """Train one variant and write its run directory (config.yaml, metrics.jsonl, status.json)."""
    from rlscale.config import ConfigError
    from rlscale.train.entry import prepare_run_dir, train_run_dir

    if run_dir is None:
        try:
            run_dir = prepare_run_dir(overrides or [], config_name, force)
        except ConfigError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2)
    elif not (run_dir / "config.yaml").exists():
        typer.echo(f"error: --run-dir {run_dir}: no config.yaml there", err=True)
        raise typer.Exit(2)
    state = train_run_dir(run_dir)
    typer.echo(f"{run_dir}: {state}")
    raise typer.Exit(0 if state == "done" else 1)
