"""``rlscale fit`` and ``rlscale report`` need neither torch nor transformers (the light install of the
README): in a process where importing them fails, both commands fit a synthetic run of known parameters
and write their outputs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from rlscale.testing.curves import CurveSpec, synthetic_curve, write_run

BLOCKED = ("torch", "transformers", "deepspeed", "vllm", "reasoning_gym", "math_verify")
SCRIPT = """
import sys

class Absent:  # 'import torch' raises ImportError, as in an install without it
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{name!r}}")

sys.meta_path.insert(0, Absent())
from rlscale.cli import app
app(sys.argv[1:])
"""


def light(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(blocked=BLOCKED), *args], capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parents[2])


def test_fit_and_report_run_without_torch(tmp_path):
    x, y = synthetic_curve(CurveSpec(A=0.6, B=1.5, C_mid=2000.0), 40, 0.0, np.random.default_rng(0))
    write_run(tmp_path / "results" / "one", x, y)
    fit = light("fit", str(tmp_path / "results"), "--n-boot", "0")
    assert fit.returncode == 0, fit.stderr
    fits = json.loads((tmp_path / "results" / "fits.json").read_text())
    run = fits["runs"][0] if isinstance(fits, dict) else fits[0]
    assert abs(run["A"] - 0.6) < 1e-3 and abs(run["B"] - 1.5) < 1e-2
    report = light("report", "--html", str(tmp_path / "results"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "results" / "report.html").stat().st_size > 10_000
