"""The ``rlscale`` console script. Each command has its module here (``run``, ``sweep`` with ``status`` and ``cancel``,
``fit``, ``report``, ``plan``, ``confirm``); the domain packages they drive import none of them. This module only
registers them, so ``rlscale --help`` stays fast."""
from __future__ import annotations

import functools
from typing import Callable

import typer
from typer.core import TyperCommand

from rlscale.cli.confirm import confirm_command
from rlscale.cli.fit import fit_command
from rlscale.cli.plan import plan_command
from rlscale.cli.report import report_command
from rlscale.cli.run import optional_info, run_command
from rlscale.cli.sweep import cancel_command, status_command, sweep_command
from rlscale.config.registry import axes_help
from rlscale.paths import DOCS_DIR


def one_line_errors(command: Callable) -> Callable:
    """Turn what the file system refuses (read-only folder, full disk, a file where a folder is due) and
    refusals that protect results (a folder in use, a resume that would lose metrics) into one line on
    stderr and exit status 1, and Ctrl-C into one line and exit status 130, instead of a traceback."""
    from rlscale.runfolder.errors import Refused
    from rlscale.runfolder.names import printable

    @functools.wraps(command)
    def wrapped(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except Refused as err:
            typer.echo(printable(f"error: {err}"), err=True)
        except OSError as err:
            where = f"{err.filename}: " if err.filename else ""
            typer.echo(printable(f"error: {where}{err.strerror or err}"), err=True)
        except KeyboardInterrupt:
            typer.echo("interrupted (Ctrl-C): every file written so far is whole; rerun the command to go on",
                       err=True)
            raise typer.Exit(130)
        raise typer.Exit(1)

    return wrapped


# the reference pages ship with the package (rlscale.paths), so these paths resolve from a clone and an install
REFERENCE = f"Reference pages: {DOCS_DIR} (commands.md, configuration.md, results-contract.md, backends.md)."
app = typer.Typer(no_args_is_help=True, help="Run, fit and report RL-compute scaling experiments (ScaleRL).",
                  epilog=REFERENCE, context_settings={"help_option_names": ["-h", "--help"]})


def _version(value: bool) -> None:
    if value:
        from rlscale import __version__

        typer.echo(f"rlscale {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """Run, fit and report RL-compute scaling experiments (ScaleRL)."""


class TakesOverrides(TyperCommand):
    """A command that takes Hydra overrides; its --help ends with the config values (``axes_help``), composed
    when the help is shown: the tables of some axes live in the modules of their code, which import torch."""

    def format_help(self, ctx, formatter) -> None:
        self.epilog = (f"{axes_help()} Every field: {DOCS_DIR / 'configuration.md'}; plug-ins: "
                       f"{DOCS_DIR / 'extending.md'}.")
        super().format_help(ctx, formatter)


class RunCommand(TakesOverrides):
    """``rlscale run``: its ``--info`` takes a part optionally, as Hydra's does (``optional_info``)."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, optional_info(list(args)))


# the commands that take Hydra overrides: options anywhere among them, the config values listed in --help
TAKES_OVERRIDES = {"context_settings": {"allow_interspersed_args": True}, "cls": TakesOverrides}
app.command("run", **{**TAKES_OVERRIDES, "cls": RunCommand})(one_line_errors(run_command))
app.command("sweep", **TAKES_OVERRIDES)(one_line_errors(sweep_command))
app.command("status")(one_line_errors(status_command))
app.command("cancel")(one_line_errors(cancel_command))
app.command("fit")(one_line_errors(fit_command))
app.command("report")(one_line_errors(report_command))
app.command("plan")(one_line_errors(plan_command))
app.command("confirm")(one_line_errors(confirm_command))
