"""bench/fit_bench.py --quick, as CI runs it: the fast fit against App. A.5's grid timed in one process (the ratio
that ends its table), never a higher SSE, and every run of the end-to-end part fitted."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MIN_RATIO = 50  # the target is 100x; a loaded CI machine gets half that margin


def test_fit_bench_quick(tmp_path):
    out = tmp_path / "fit_bench.md"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "fit_bench.py"), "--quick", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.strip() == done.stdout.strip()
    row = next(line for line in text.splitlines() if line.startswith("| scalerl |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    sse_paper, sse_fast = float(cells[4]), float(cells[5])
    assert sse_fast <= sse_paper + 1e-6
    median = re.search(r"\| \*\*median\*\* of 1 \|.*\*\*(\d+)x\*\* \|$", text, re.MULTILINE)
    assert median is not None and int(median.group(1)) >= MIN_RATIO, text
    end_to_end = next(line for line in text.splitlines() if line.startswith("| 40 x 100 |"))
    assert [c.strip() for c in end_to_end.strip("|").split("|")][7] == "40"  # every run fitted
