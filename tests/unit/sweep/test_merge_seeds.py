"""scripts/merge-seeds.py: new seeds trained in a folder of their own join a committed sweep, and ``rlscale fit``
then reads them as one sweep."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "merge-seeds.py"
SPEC = {"name": "loo_x", "kind": "loo", "base": "scalerl", "overrides": ["model=tiny"], "launcher": "local"}


def sweep(folder: Path, runs: dict) -> Path:
    """A sweep folder: sweep.json listing ``runs`` ({(variant, seed): state}), each a synthetic run."""
    variants = []
    for (name, seed), state in runs.items():
        run = f"{name}_s{seed}"
        x, y = synthetic_curve(TABLE1["scalerl"], 24, 0.01, np.random.default_rng(seed))
        write_run(folder / run, x, y, seed=seed)
        (folder / run / "status.json").write_text(json.dumps({"state": state, "step": 24}))
        variants.append({"name": name, "seed": seed, "run": run, "run_dir": run, "config": "config",
                         "overrides": [], "axis": None})
    (folder / "sweep.json").write_text(json.dumps({**SPEC, "seeds": len({s for _, s in runs}), "variants": variants}))
    return folder


def merge(new: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(new), str(dest)], capture_output=True, text=True,
                          timeout=120)


def test_finished_new_seeds_join_in_variant_order_and_fit_reads_them(tmp_path):
    dest = sweep(tmp_path / "example" / "loo_x", {("scalerl", 0): "done", ("loss_dapo", 0): "done"})
    kept = (dest / "scalerl_s0" / "metrics.jsonl").read_bytes()
    new = sweep(tmp_path / "device" / "loo_x", {("scalerl", 0): "done", ("scalerl", 1): "done",
                                                ("scalerl", 2): "running", ("loss_dapo", 1): "done"})
    (new / "scalerl_s0" / "metrics.jsonl").write_text("")  # a run the example holds is never overwritten
    (new / "scalerl_s1" / "checkpoints").mkdir()
    done = merge(new, dest)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["scalerl_s2: running, left out",
                                        f"2 runs added to {dest}: scalerl_s1, loss_dapo_s1"]
    spec = json.loads((dest / "sweep.json").read_text())
    assert [(v["name"], v["seed"]) for v in spec["variants"]] == [("scalerl", 0), ("scalerl", 1), ("loss_dapo", 0),
                                                                  ("loss_dapo", 1)]
    assert spec["seeds"] == 2 and (dest / "scalerl_s0" / "metrics.jsonl").read_bytes() == kept
    assert not (dest / "scalerl_s1" / "checkpoints").exists() and not (dest / "scalerl_s2").exists()
    fit = subprocess.run([sys.executable, "-m", "rlscale.cli", "fit", str(dest.parent)], capture_output=True,
                         text=True, timeout=300)
    assert fit.returncode == 0, fit.stderr
    with open(dest.parent / "fits.csv") as fh:
        fitted = sorted((row["sweep"], row["variant"], row["seed"]) for row in csv.DictReader(fh))
    assert fitted == [("loo_x", v, s) for v in ("loss_dapo", "scalerl") for s in ("0", "1")]


def test_a_sweep_of_another_spec_is_refused_and_nothing_is_written(tmp_path):
    dest = sweep(tmp_path / "example" / "loo_x", {("scalerl", 0): "done"})
    before = (dest / "sweep.json").read_text()
    new = sweep(tmp_path / "device" / "loo_x", {("scalerl", 1): "done"})
    spec = json.loads((new / "sweep.json").read_text())
    (new / "sweep.json").write_text(json.dumps({**spec, "overrides": ["model=smollm2"]}))
    done = merge(new, dest)
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: {new}/sweep.json differs from {dest}/sweep.json in overrides"
    assert (dest / "sweep.json").read_text() == before and not (dest / "scalerl_s1").exists()
