"""``rlscale confirm PLAN_JSON RESULTS...``: a plan's predictions checked against later runs (new seeds of its
settings, or its runs extended past the budget; rlscale.plan.confirm): per setting hit or miss, whether the
tiers held; writes confirm.json (atomic) into --out, default the first RESULTS folder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer


def _fail(message: str) -> None:
    from rlscale.runfolder.names import printable

    typer.echo(printable(f"error: {' '.join(message.split())}"), err=True)
    raise typer.Exit(2)


def confirm_command(
    plan_json: Path = typer.Argument(..., metavar="PLAN_JSON", help="plan.json written by rlscale plan."),
    results: List[Path] = typer.Argument(..., metavar="RESULTS",
                                         help="Results folders of the later runs (as rlscale fit takes)."),
    out: Optional[Path] = typer.Option(None, "--out", help="confirm.json's folder (default: the first RESULTS)."),
) -> None:
    """Check a plan against runs it was not fitted on: for each setting, the plan's prediction interval for
    the mean of the later runs at the budget against their observed mean (hit or miss), and whether the
    tiers held (observed order, differences resolved under Holm, ties within the margin)."""
    from rlscale.cli.console import output_console
    from rlscale.fit.curves import SourceError, load_source
    from rlscale.plan.confirm import CONFIRM_JSON, PlanError, confirm, confirm_json, read_plan
    from rlscale.plan.confirm_view import confirm_view
    from rlscale.runfolder import atomic_write_json

    if not plan_json.is_file():
        _fail(f"PLAN_JSON {plan_json}: no such file")
    try:
        plan = read_plan(json.loads(plan_json.read_text()))
    except ValueError as err:  # PlanError, JSONDecodeError and UnicodeDecodeError are ValueErrors
        _fail(f"PLAN_JSON {plan_json}: {err if isinstance(err, PlanError) else 'not JSON: not a plan.json'}")
    curves = []
    for folder in results:
        if not folder.is_dir():
            _fail(f"RESULTS {folder}: no such folder")
        try:
            curves += load_source(folder, plan["x"], plan.get("y", "val_reward")).curves
        except SourceError as err:
            _fail(f"RESULTS {folder}: {err}")
    checks, unmatched = confirm(plan, curves)
    if len(unmatched) == len(curves):
        _fail(f"RESULTS {' '.join(map(str, results))}: no run matches a setting of the plan (its sweeps: "
              f"{', '.join(s['sweep'] for s in plan['sweeps'])})")
    path = (out or results[0]) / CONFIRM_JSON
    check = confirm_json(checks, plan, str(plan_json), unmatched)
    atomic_write_json(path, check)
    console = output_console()
    for part in confirm_view(check):
        console.print(part)
    console.print(f"wrote {path}")
