"""Ctrl-C during a command: one line on stderr, exit status 130, no traceback, and no half-written file."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np

from rlscale.testing.curves import TABLE1, synthetic_curve, write_run


def _interruptible() -> None:
    """Ctrl-C's default action in the child, as in a terminal: a test run from a background job (``cmd &`` in
    a script) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_fit_prints_one_line_and_exits_130(tmp_path):
    for seed in range(4):
        x, y = synthetic_curve(TABLE1["scalerl"], 60, 0.01, np.random.default_rng(seed))
        write_run(tmp_path / "results" / "sweep" / f"base_s{seed}", x, y, seed=seed)
    proc = subprocess.Popen([sys.executable, "-m", "rlscale.cli", "fit", str(tmp_path / "results"), "--n-boot",
                             "2000000", "--force", "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_interruptible)
    started = proc.stderr.readline()  # the first line comes once the runs are read: past the imports
    assert started.startswith("fitting 4 runs under"), started
    time.sleep(2)  # inside the bootstrap
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole process group
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted (Ctrl-C)")
    assert not (tmp_path / "results" / "fits.json").exists()
