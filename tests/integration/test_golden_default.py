"""The embedded default's numbers, pinned: a short default run from an empty cache (so the warm-up is rebuilt)
writes the metrics stored for the machine's CPU kind in ``tests/golden/default_run-<VENDOR>-<CAPABILITY>.json``
(the CPU's vendor, GenuineIntel or AuthenticAMD, and torch's CPU capability, AVX512 or AVX2: MKL takes other code
paths on the two vendors, so an AMD and an Intel machine of one capability give other numbers), every logged
value but the measured ones. On a kind without a file the run is made twice and the two must agree: the same
seed gives the same numbers on one machine.

Regenerate the file of a machine's kind after a change that moves the embedded default's numbers:
``RLSCALE_REGEN_GOLDEN=1 python -m pytest tests/integration/test_golden_default.py`` (on a machine of each kind
that has a file).

The warm-up runs in one thread whatever the thread count (``rlscale.engines.models.tiny_model``), and
``engine.threads`` 1, 2 and 4 gave the same values; the run still pins ``engine.threads=1``, since the default
(0) shares all of a machine's cores between the trainer and its generator, a count no machine of the test has
checked. Floats agree to ``REL_TOL`` on machines of one CPU kind; counts, kinds and steps exactly. Machines of
two kinds differ from the first update on (vectorized float sums round differently), so each kind has its file.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import torch

pytestmark = pytest.mark.slow

def cpu_vendor() -> str:
    """The CPU's vendor_id (GenuineIntel, AuthenticAMD), "unknown" where /proc/cpuinfo does not say."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("vendor_id")), "unknown")


CAPABILITY = torch.backends.cpu.get_cpu_capability()
VENDOR = cpu_vendor()
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"default_run-{VENDOR}-{CAPABILITY}.json"
REGEN_ENV = "RLSCALE_REGEN_GOLDEN"
OVERRIDES = ["trainer.max_steps=6", "engine.threads=1"]  # evals at steps 0 and 6 (trainer.eval_every=6)
MEASURED_SUFFIXES = ("_s", "_seconds", "_hours")  # times, throughputs, core-hours
MEASURED = {"generator_idle_frac", "queue_depth"}  # depend on how the trainer and its generator interleave
REL_TOL = 1e-6
REGEN_HINT = (f"if the change is meant to move the embedded default's numbers, regenerate the golden file of each "
              f"CPU kind with `{REGEN_ENV}=1 python -m pytest tests/integration/test_golden_default.py` and update "
              "the README's tables and docs/embedded-default.md to match")


def deterministic(record: Dict) -> Dict:
    """A metrics record without its measured values."""
    return {k: v for k, v in record.items() if not k.endswith(MEASURED_SUFFIXES) and k not in MEASURED}


def default_run(tmp_path: Path) -> List[Dict]:
    """The deterministic metrics of the short default run, with a cache of its own (empty at the start)."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlscale.cli", "run", f"out={run_dir}", f"cache_dir={tmp_path / 'cache'}", *OVERRIDES]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return [deterministic(json.loads(line)) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def golden_document(records: List[Dict]) -> Dict:
    return {"overrides": OVERRIDES, "cpu_capability": CAPABILITY, "cpu_vendor": VENDOR, "metrics": records}


def same_value(expected, actual) -> bool:
    """Floats to ``REL_TOL``; everything else (counts, kinds, steps) exactly."""
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        return math.isclose(expected, actual, rel_tol=REL_TOL, abs_tol=REL_TOL * 1e-3)
    return expected == actual


def differences(expected: List[Dict], actual: List[Dict]) -> List[str]:
    """One line per record or value that differs."""
    if [(r["kind"], r["step"]) for r in expected] != [(r["kind"], r["step"]) for r in actual]:
        return [f"records: expected {[(r['kind'], r['step']) for r in expected]}, "
                f"got {[(r['kind'], r['step']) for r in actual]}"]
    lines = []
    for exp, act in zip(expected, actual):
        for key in sorted(exp.keys() | act.keys()):
            if key not in exp or key not in act or not same_value(exp[key], act[key]):
                lines.append(f"{exp['kind']} step {exp['step']} {key}: expected {exp.get(key)}, got {act.get(key)}")
    return lines


def test_default_run_matches_the_golden_metrics(tmp_path):
    records = default_run(tmp_path)
    if os.environ.get(REGEN_ENV) == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(golden_document(records), indent=1, sort_keys=True) + "\n")
        return
    if not GOLDEN.is_file():  # a kind without a file: the run must at least repeat itself on this machine
        (tmp_path / "again").mkdir()
        again = default_run(tmp_path / "again")
        diff = differences(records, again)
        assert not diff, (f"two default runs on this machine ({VENDOR}, {CAPABILITY}) differ:\n" + "\n".join(diff[:40]))
        return
    golden = json.loads(GOLDEN.read_text())
    assert golden["overrides"] == OVERRIDES, f"the test's overrides changed: {REGEN_HINT}"
    assert golden["cpu_capability"] == CAPABILITY and golden.get("cpu_vendor", VENDOR) == VENDOR
    diff = differences(golden["metrics"], records)
    assert not diff, (f"the default run's metrics differ from {GOLDEN.name}:\n" + "\n".join(diff[:40])
                      + f"\n{REGEN_HINT}")
