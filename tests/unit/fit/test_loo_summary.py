"""scripts/loo-summary.py: a LOO study's README tables, read from what ``rlscale fit`` wrote for a synthetic sweep
with known truth (one axis that lowers A well past the margin, one that changes nothing)."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from rlscale.testing.curves import TABLE1, loo_sweep, write_run

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "loo-summary.py"


def test_the_tables_carry_every_run_and_the_fit_s_comparisons(tmp_path):
    curves, spec = loo_sweep(TABLE1["scalerl"], {"lower": (-0.08, 0.0), "same": (0.0, 0.0)}, 3,
                             np.random.default_rng(2))
    for c in curves:
        write_run(tmp_path / c.run_path, c.x, c.y, seed=c.seed)
    spec["variants"] = [{**v, "run_dir": v["run"]} for v in spec["variants"]]
    (tmp_path / "loo" / "sweep.json").write_text(json.dumps(spec))
    fit = subprocess.run([sys.executable, "-m", "rlscale.cli", "fit", str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert fit.returncode == 0, fit.stderr
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    runs = [m[1] for m in map(re.compile(r"^\| (\w+ s\d+) \|").match, lines) if m]
    assert runs == [f"{v} s{s}" for v in ("base", "lower", "same") for s in range(3)]
    with open(tmp_path / "comparison.csv", newline="") as fh:
        loo = {r["variant"]: r for r in csv.DictReader(fh) if r["kind"] == "loo" and r["verdict"] != "base"}
    lower = next(line for line in lines if line.startswith("| lower |")).split(" | ")
    assert lower[1] == f"{float(loo['lower']['dA']):+.3f} [{float(loo['lower']['dA_lo']):+.3f}, " \
                       f"{float(loo['lower']['dA_hi']):+.3f}]"
    assert lower[3] == "3, 3" and lower[4].startswith("lower ceiling")
    same = next(line for line in lines if line.startswith("| same |")).split(" | ")
    row = loo["same"]
    assert row["verdict"] in ("within margin", "unresolved")  # the null axis
    verdict = row["verdict"] + (f" ({row['reason']})" if row["reason"] else "")
    assert same[4].rstrip(" |") == verdict + (f": {row['needs']}" if row["needs"] else "")
    assert any(line.startswith("| variant | dA [CI] | dB at A ") and line.endswith("(Holm over 4) |") for line in lines)
