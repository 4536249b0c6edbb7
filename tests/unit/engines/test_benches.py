"""The GPU benchmarks of the engines in their CPU mode, as CI runs them, so that they keep running between the
GPU runs: ``bench/gpu_bench.py --quick`` (every section but TRL on the tiny shape, the ScaleRL step at the
paper's lengths included) and
``bench/long_sequence_bench.py --quick`` (the learner with checkpointing and the head's chunks off and on) and
``bench/generator_rows_bench.py --device cpu --tiny`` (refilled rows against static batches)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(script: str, out: Path, *flags: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *(flags or ("--quick",)), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def cells(text: str, label: str) -> list:
    row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    return [c.strip() for c in row.strip("|").split("|")][1:]


def test_gpu_bench_quick_runs_every_section_on_cpu(tmp_path):
    run("gpu_bench.py", tmp_path)
    text = (tmp_path / "gpu_bench.md").read_text()
    assert "graph_equals_eager=True" in text and "phases_ok=True" in text
    assert all(float(c) > 0 for c in cells(text, "training tokens/s"))  # both heads
    assert all(float(c) > 0 for c in cells(text, "RL step s (end to end)"))
    assert "| LM head alone, bf16 weights, 1024 rows | tiny |" in text
    assert re.search(r"\| tiny-0gpu \| immediate \| [\d.]+ \| [\d.]+ \| [\d.]+x \|", text)
    assert re.search(r"\| tiny \| off \| 8 \| 1 \| [\d.]+ \| 0 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| \d+ \| \d \| n/a \|", text)
    long = json.loads((tmp_path / "gpu_bench.json").read_text())["long"]["tiny"]
    assert [s["samples"] for s in long["steps"]] == [8, 8]  # 2 prompts x 4 generations, two PipelineRL steps
    assert long["estimate_parts"]["published_weights"] == long["estimate_parts"]["generator_weights"]  # one copy
    sections = json.loads((tmp_path / "gpu_bench.json").read_text())["section_seconds"]
    assert sorted(sections) == ["checks", "env", "head", "long", "models", "pipeline"]


def test_long_sequence_bench_quick_ends_in_the_ratio_and_both_lower_the_peak(tmp_path):
    out = tmp_path / "long.md"
    printed = run("long_sequence_bench.py", out)
    text = out.read_text()
    assert text.strip() in printed
    peaks = {(row["checkpointing"], row["chunk"]): row["peak_gib"]
             for row in json.loads(out.with_suffix(".json").read_text())["tiny"]}
    assert peaks[True, 128] < peaks[False, 128] < peaks[False, 0]  # each lowers it
    assert peaks[True, 128] < peaks[True, 0] < peaks[False, 0]
    ratio = re.search(r"on / both off: tiny: peak memory ([\d.]+)x, update time ([\d.]+)x$", text.strip())
    assert ratio is not None and float(ratio.group(1)) < 0.5, text


def test_generator_rows_bench_tiny_compares_refilled_rows_with_static_batches(tmp_path):
    out = tmp_path / "rows.md"
    printed = run("generator_rows_bench.py", out, "--device", "cpu", "--tiny")
    text = out.read_text()
    assert text.strip() in printed
    records = {r["mode"]: r for r in json.loads(out.with_suffix(".json").read_text())}
    refill, static = records["refill"], records["static"]
    assert refill["rows"] == static["rows"] == 3 and refill["in_order"] and static["in_order"]
    assert refill["interrupted"] == static["interrupted"] == 8  # every trace ended at its drawn think length
    # 8 completions on 3 rows: the static batches wait for their longest trace, the refilled rows do not
    assert refill["steps"] < static["steps"]
    assert refill["estimate_gib"] < static["estimate_gib"]  # 3 rows against a static bucket of 8
    assert re.search(r"refill / static samples/s: tiny: [\d.]+x$", text.strip()), text
    run("generator_rows_bench.py", out, "--device", "cpu", "--tiny", "--memory-only")
    memory = {r["mode"]: r for r in json.loads(out.with_suffix(".json").read_text())}
    assert {m: r["estimate_gib"] for m, r in memory.items()} == {m: records[m]["estimate_gib"] for m in records}
    assert "| tiny | refill | 3 | memory only |" in out.read_text() and "samples_per_s" not in memory["refill"]
