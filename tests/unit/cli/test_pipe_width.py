"""Tables printed into a pipe keep each row on one line: ``rlscale fit``, ``plan`` and ``status`` read from a
subprocess's stdout (not a terminal, no COLUMNS) end no cell in an ellipsis and wrap no note."""
from __future__ import annotations

import os
import subprocess
import sys


def _piped(*args) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _one_row_per_line(table_text: str, names) -> None:
    assert "…" not in table_text
    for name in names:
        rows = [line for line in table_text.splitlines() if line.startswith("│") and f" {name} " in line]
        assert rows, f"no row of {name}"
        for row in rows:
            assert row.rstrip().endswith("│"), f"row cut or wrapped: {row!r}"


def test_fit_tables_in_a_pipe_keep_whole_rows(three_variants, tmp_path):
    out = _piped("fit", three_variants, "--out", tmp_path, "--n-boot", "20")
    _one_row_per_line(out, ["scalerl", "gens_8", "batch_2048"])
    notes = [line for line in out.splitlines() if line.startswith("│") and "seeds" in line]
    assert any("not resolved" in line or "resolved" in line for line in notes)
    assert len(out.splitlines()) < 40  # 6 runs and 3 variants: one line each, not cells folded into 8-line rows


def test_plan_and_status_in_a_pipe_keep_whole_rows(three_variants, tmp_path):
    _piped("fit", three_variants, "--n-boot", "20")
    _one_row_per_line(_piped("plan", three_variants, "--budget", "20000", "--out", tmp_path), ["scalerl", "gens_8"])
    _one_row_per_line(_piped("status", three_variants), ["scalerl_s0", "batch_2048_s1"])
