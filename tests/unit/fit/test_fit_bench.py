"""bench/fit_bench.py --quick, as CI runs it: the fast fit against App. A.5's grid timed in one process (the ratio
that ends its table), never a higher SSE, and every run of the end-to-end part fitted."""
from __future__ import annotations

import re

MIN_RATIO = 50  # the target is 100x; a loaded CI machine gets half that margin


def test_fit_bench_quick(quick_bench):
    text = quick_bench("fit_bench.py")
    row = next(line for line in text.splitlines() if line.startswith("| scalerl |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    sse_paper, sse_fast = float(cells[4]), float(cells[5])
    assert sse_fast <= sse_paper + 1e-6
    median = re.search(r"\| \*\*median\*\* of 1 \|.*\*\*(\d+)x\*\* \|$", text, re.MULTILINE)
    assert median is not None and int(median.group(1)) >= MIN_RATIO, text
    end_to_end = next(line for line in text.splitlines() if line.startswith("| 40 x 100 |"))
    assert [c.strip() for c in end_to_end.strip("|").split("|")][7] == "40"  # every run fitted
