"""Tables printed into a pipe fit 120 columns and never cut a value: ``rlscale fit``, ``report``, ``plan`` and
``status`` read from a subprocess's stdout (not a terminal, no COLUMNS) keep every line within 120 characters,
end no cell in an ellipsis, and print each run's A and its interval whole (headers and notes wrap instead)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from rich.console import Console
from rich.text import Text

from rlscale.cli.console import PIPE_WIDTH
from rlscale.tables import WrappingTable


def _piped(*args) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _fits_the_pipe(text: str) -> None:
    assert PIPE_WIDTH == 120
    widest = max(map(len, text.splitlines()))
    assert widest <= PIPE_WIDTH, f"a line of {widest} characters"
    assert "…" not in text


def test_fit_and_report_tables_in_a_pipe_fit_120_columns(three_variants, tmp_path):
    out = _piped("fit", three_variants, "--out", tmp_path, "--n-boot", "20")
    _fits_the_pipe(out)
    runs = json.loads((tmp_path / "fits.json").read_text())["runs"]
    for run in runs:  # each number of the runs table whole, the interval on one line
        assert f"{run['A']:.3f}" in out
        assert f"[{run['A_lo']:.3f},{run['A_hi']:.3f}]" in out
    _fits_the_pipe(_piped("report", tmp_path))


def test_plan_and_status_in_a_pipe_fit_120_columns(three_variants, tmp_path):
    _piped("fit", three_variants, "--n-boot", "20")
    _fits_the_pipe(_piped("plan", three_variants, "--budget", "20000", "--out", tmp_path))
    _fits_the_pipe(_piped("status", three_variants))


def test_a_wide_table_wraps_its_words_and_keeps_its_numbers():
    table = WrappingTable(title="t")
    for header in ("run", "A [95% CI] with a long header", "note"):
        table.add_column(header)
    note = "a long note that explains the ranking of this variant in many words " * 3
    table.add_row("scalerl_s0", "0.869 [0.807,0.932]", Text(note))
    console = Console(width=60, record=True, file=open(os.devnull, "w"))
    console.print(table)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 60
    assert "[0.807,0.932]" in text and "scalerl_s0" in text and "…" not in text
    assert text.count("explains") == 3  # every word of the note kept, wrapped over lines
