"""bench/verdict_bench.py --quick, as CI runs it: every table prints, and on every case's null axes the default
correction (Holm) leaves no more sweeps with a false finding than --no-correction does on the same fits."""
from __future__ import annotations

import re

RATE = re.compile(r"^(\d+(?:\.\d+)?)% \[.*\] \((\d+)/(\d+)\)$")


def test_verdict_bench_quick(quick_bench):
    text = quick_bench("verdict_bench.py")
    for title in ("## Part 1: coverage", "### Truths that are not Eq. 1", "## Part 1b", "## Part 2", "## Acceptance"):
        assert title in text
    assert "| drift 0.01, 400 samples, t(3) errors | 12 |" in text
    assert "| stopped at 30 % of the rise, 16 evals, drift 0.01, 400 samples | 12 |" in text
    family = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[2] in ("holm", "none") and cells[1].isdigit():
            match = RATE.match(cells[3])
            assert match, line
            family[(cells[0], int(cells[1]), cells[2])] = int(match.group(2)) / int(match.group(3))
    cases = {case for case, _, _ in family}
    assert len(cases) == 4 and len(family) == 4 * 2 * 2
    for (case, seeds, correction), rate in family.items():
        if correction == "holm":
            assert rate <= family[(case, seeds, "none")], (case, seeds)
    assert re.search(r"^\d+ of \d+ checks met or n/a; failed: ", text, re.MULTILINE)
