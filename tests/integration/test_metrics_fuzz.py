"""Property-based: random and truncated metrics.jsonl files (values of every JSON type in every field,
random bytes, overlong lines, a cut at any byte) never make ``rlscale fit``, ``status`` or ``report``
raise, never spoil the fit of a good run beside them, and cost memory and messages bounded by the
reader's limits, not by the file."""
from __future__ import annotations

import json
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run
from rlscale.runfolder.metrics import MAX_LINE_BYTES, read_metrics

ANY = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(), st.text(max_size=6),
                st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
RECORD = st.fixed_dictionaries({}, optional={
    "step": st.one_of(st.integers(0, 40), ANY), "kind": st.one_of(st.sampled_from(["eval", "train"]), ANY),
    "gpu_hours": st.one_of(st.floats(0, 5000), ANY), "val_reward": st.one_of(st.floats(0, 1), ANY),
    "step_seconds": st.one_of(st.floats(0, 10), ANY), "truncation_rate": ANY})
LINE = st.one_of(RECORD.map(lambda r: json.dumps(r).encode()), st.binary(max_size=60),
                 st.just(b"{" * (MAX_LINE_BYTES + 10)))


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def good_run(root: Path) -> None:
    x, y = synthetic_curve(TABLE1["scalerl"], 20, 0.01, np.random.default_rng(0))
    write_run(root / "sw" / "good", x, y, seed=0)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINE, max_size=12), cut=st.floats(0, 1), state=st.sampled_from(["running", "done", "junk"]))
def test_random_metrics_never_break_fit_status_or_report(lines, cut, state):
    data = b"\n".join(lines)
    data = data[:int(len(data) * cut)] if cut < 1 else data
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        good_run(root)
        fuzzed = root / "sw" / "fuzzed"
        fuzzed.mkdir()
        (fuzzed / "metrics.jsonl").write_bytes(data)
        (fuzzed / "status.json").write_text(json.dumps({"state": state, "pid": 1}) if state != "junk" else "[")

        tracemalloc.start()
        records, warnings = read_metrics(fuzzed / "metrics.jsonl")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 4 * min(len(data), MAX_LINE_BYTES) + (4 << 20)
        assert len(warnings) <= 6 and all(len(w) < 200 for w in warnings)
        assert all(isinstance(r["step"], int) and isinstance(r.get("kind", "train"), str) for r in records)

        fit = cli("fit", root, "--n-boot", "0")
        assert fit.exit_code == 0 and "Traceback" not in fit.output, fit.output
        runs = {r["variant"]: r for r in json.loads((root / "fits.json").read_text())["runs"]}
        assert runs["good"]["status"] == "ok" and len(runs["fuzzed"]["message"]) < 1500
        for args in (["status", root], ["report", root]):
            result = cli(*args)
            assert result.exit_code == 0 and "Traceback" not in result.output, (args, result.output)
