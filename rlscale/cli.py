"""The ``rlscale`` console script. Each command lives beside the package it drives; this module only
registers them, so ``rlscale --help`` stays fast."""
from __future__ import annotations

import typer

from rlscale.fit.command import fit_command
from rlscale.plan.command import plan_command
from rlscale.report.command import report_command
from rlscale.sweep.command import status_command, sweep_command
from rlscale.train.command import run_command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Run, fit and report RL-compute scaling experiments (ScaleRL).",
                  context_settings={"help_option_names": ["-h", "--help"]})
app.command("run", context_settings={"allow_interspersed_args": True})(run_command)
app.command("sweep", context_settings={"allow_interspersed_args": True})(sweep_command)
app.command("status")(status_command)
app.command("fit")(fit_command)
app.command("report")(report_command)
app.command("plan")(plan_command)

if __name__ == "__main__":
    app()
