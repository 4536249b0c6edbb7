"""Folders may be named anything: a byte that is not UTF-8, a carriage return and a terminal escape sequence in
run folder names leave fit, report and plan working, every CSV row whole and valid UTF-8, no escape
sequence on the terminal, and fits.json with the names exactly as they are on disk."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

ODD = {b"bad\xff": "bad\\xff", b"cr\rname": "cr\\x0dname", b"esc\x1b[31mred": "esc\\x1b[31mred", b"plain": "plain"}


@pytest.fixture(scope="module")
def odd_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd") / "results"
    for i, name in enumerate(ODD):
        x, y = synthetic_curve(TABLE1["scalerl"], 24, 0.01, np.random.default_rng(i))
        write_run(root / "sweep" / os.fsdecode(name + b"_s0"), x, y, seed=0)
    return root


def _run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_fit_writes_every_name_whole_and_valid(odd_results):
    _run("fit", odd_results, "--n-boot", "10")
    text = (odd_results / "fits.csv").read_bytes().decode("utf-8")  # valid UTF-8, or this raises
    rows = list(csv.DictReader(text.splitlines()))  # a bare \r would split a row here
    assert sorted(r["variant"] for r in rows) == sorted(ODD.values())
    fits = json.loads((odd_results / "fits.json").read_text())
    assert sorted(os.fsencode(r["variant"]) for r in fits["runs"]) == sorted(ODD)  # exact in fits.json


def test_report_and_plan_show_every_name_escaped(odd_results):
    _run("fit", odd_results, "--n-boot", "10")
    report = _run("report", "--html", odd_results)
    page = (odd_results / "report.html").read_bytes().decode("utf-8")
    assert all(shown in page for shown in ("bad\\xff", "cr\\x0dname", "esc\\x1b[31mred"))
    plan = _run("plan", odd_results, "--budget", "20000")
    for output in (report, plan):
        assert "\x1b[31m" not in output and "\r" not in output
