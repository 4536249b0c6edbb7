"""docs/commands.md matches the program: every ``bash`` block runs as written, in page order, from a folder
whose ``results/`` holds a synthetic sweep (three Table-1 variants, two seeds; rlscale.testing.curves), with
``rlscale`` the console script of this tree and no COLUMNS; a block that cannot run on CPU is marked
``<!-- docs-test: skip REASON -->`` on the line above it and reported skipped with that reason. Every
command's synopsis names each of its options, and no table of the page repeats its header."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest
import typer

from rlscale.cli import app
from rlscale.paths import DOCS_DIR
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

PAGE = Path(__file__).resolve().parents[3] / "docs" / "commands.md"
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s+(?P<reason>.*?)\s*-->")
RUNNABLE = ("bash", "sh")
BLOCK_SECONDS = 600  # a hang guard, not a speed target: the longest block (a run of two updates after the tiny
# model's warm-up) took 84 s on two loaded cores and over 150 s beside a second test suite


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: Optional[str]

    @property
    def commands(self) -> List[str]:
        joined = self.text.replace("\\\n", " ")
        return [line for line in (raw.split("  #")[0].strip() for raw in joined.splitlines())
                if line and not line.startswith("#")]


def blocks(page: Path = PAGE) -> List[Block]:
    """The fenced blocks of ``page`` with their language and skip marker."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start, lang = i, lines[i][3:].strip()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            marker = SKIP.search(above)
            found.append(Block(start + 1, lang, "\n".join(lines[start + 1:end]), marker and marker["reason"]))
            i = end
        i += 1
    return found


BLOCKS = blocks()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder with results/sweep_a (the synthetic sweep) and bin/rlscale running this tree's CLI."""
    root = tmp_path_factory.mktemp("commands_doc")
    for i, name in enumerate(("scalerl", "gens_8", "batch_2048")):
        for seed in (0, 1):
            x, y = synthetic_curve(TABLE1[name], 48, 0.01, np.random.default_rng(10 * i + seed))
            write_run(root / "results" / "sweep_a" / f"{name}_s{seed}", x, y, seed=seed)
    shim = root / "bin" / "rlscale"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rlscale.cli "$@"\n')
    shim.chmod(0o755)
    return root


def test_every_block_is_bash_or_marked():
    unmarked = [b.line for b in BLOCKS if b.lang not in RUNNABLE and b.skip is None]
    assert not unmarked, f"docs/commands.md: blocks at lines {unmarked} are neither bash nor marked docs-test: skip"
    assert sum(b.lang in RUNNABLE and b.skip is None for b in BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line-{b.line}" for b in BLOCKS])
def test_command_block_runs(block: Block, workdir: Path):
    if block.skip is not None:
        pytest.skip(f"docs/commands.md line {block.line}: {block.skip}")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PATH"] = f"{workdir / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PAGE.parents[1]), env.get("PYTHONPATH", "")]))
    for command in block.commands:
        assert command.startswith("rlscale "), f"line {block.line}: {command!r} is not an rlscale command"
        done = subprocess.run(command, shell=True, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=BLOCK_SECONDS)
        assert done.returncode == 0, f"line {block.line}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _synopsis(command: str) -> str:
    """The synopsis block that starts with ``rlscale COMMAND``."""
    return next(b.text for b in BLOCKS if b.skip and re.search(rf"^rlscale {command}\b", b.text, re.M))


@pytest.mark.parametrize("command", ["fit", "report", "plan", "confirm"])
def test_each_synopsis_names_every_option(command):
    click_command = typer.main.get_command(app).commands[command]
    options = [max(p.opts, key=len) for p in click_command.params if p.param_type_name == "option"
               and max(p.opts, key=len) not in ("--help",)]
    assert options
    text = _synopsis(command)
    missing = [o for o in options if not re.search(rf"{re.escape(o)}\b", text)]
    assert not missing, f"docs/commands.md: the synopsis of rlscale {command} omits {missing}"


def test_no_table_repeats_its_header():
    lines = PAGE.read_text().splitlines()
    for i, line in enumerate(lines[:-1]):
        if re.match(r"\s*\|[-| ]+\|\s*$", lines[i + 1]) and line.strip().startswith("|"):
            table = []
            for row in lines[i + 2:]:
                if not row.strip().startswith("|"):
                    break
                table.append(row.strip())
            assert line.strip() not in table, f"docs/commands.md line {i + 1}: the table repeats its header"


def test_the_page_ships_with_the_package():
    assert (DOCS_DIR / "commands.md").read_text() == PAGE.read_text()
