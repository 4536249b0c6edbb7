"""The benchmarks of ``bench/`` in their CPU modes, as CI runs them, so that a change that breaks one fails here
and not on the next GPU run: the Triton benches through Triton's interpreter (``--smoke``), the GPU benches on
the tiny shape (``--device cpu --tiny``), the CPU benches at their smallest sizes. Each test checks the numbers
of the bench's table, not only its exit status. The four that train the embedded default end to end (two
evaluations of 400 prompts a run at least) are in ``tests/integration/test_bench_cpu_trainer_runs.py``."""
from __future__ import annotations

import json
import math
import os
import re

import pytest

from bench_runs import NUMBER, bench

def rows(text: str, first: str) -> list[list[str]]:
    """The cells of the markdown rows that start with ``| first |``."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith(f"| {first} |")]


def test_decode_attention_smoke_checks_the_kernel_against_the_reference(tmp_path):
    out = tmp_path / "attention.json"
    bench("decode_attention_bench.py", "--smoke", "--no-sweep", "--json", str(out))
    cases = json.loads(out.read_text())["cases"]
    assert [(c["model"], c["kv_len"]) for c in cases] == [(m, n) for m in ("smollm2-135m", "qwen2-0.5b")
                                                           for n in (40, 70)]
    assert all(c["err_triton"] < 2e-2 and c["err_sdpa"] < 2e-2 for c in cases)
    assert json.loads(out.read_text())["failures"] == []


def test_decode_gemm_smoke_matches_f_linear_on_every_gemm(tmp_path):
    out = tmp_path / "gemm.json"
    printed = bench("decode_gemm_bench.py", "--smoke", "--json", str(out)).stdout
    results = json.loads(out.read_text())["results"]
    assert [r["gemm"] for r in results] == ["qkv", "o", "gate_up", "down", "head"]
    assert all(0 < r["max_err"] < 2e-2 for r in results)
    assert len(rows(printed, "tiny")) == 5 and all(r[-1] == "True" for r in rows(printed, "tiny"))


def test_sampler_smoke_draws_as_the_torch_sampler(tmp_path):
    out = tmp_path / "sampler.json"
    bench("sampler_bench.py", "--smoke", "--json", str(out))
    records = json.loads(out.read_text())["rows"]
    assert [(r["model"], r["vocab"], r["fast_log"]) for r in records] == [("smollm2-135m", 1000, False),
                                                                          ("qwen2-0.5b", 3000, False)]
    assert all(r["same_draws"] == 1.0 and r["lse_err"] < 1e-4 for r in records)


def test_persistent_probe_smoke_ends_exact_in_every_variant(tmp_path):
    out = tmp_path / "probe.json"
    printed = bench("persistent_probe.py", "--smoke", "--json", str(out)).stdout
    records = json.loads(out.read_text())["rows"]
    assert [r["slab_mb"] for r in records] == [0.0, 0.1] and all(r["programs"] == 1 for r in records)
    assert all(r[f"{v}_exact"] for r in records for v in ("kernels", "persistent", "persistent+prefetch"))
    assert [r[5] for r in rows(printed, "0.0") + rows(printed, "0.1")] == ["True", "True"]


def test_decode_compile_variants_tiny_times_each_variant_against_default(tmp_path):
    out = tmp_path / "variants.json"
    printed = bench("decode_compile_variants.py", "--device", "cpu", "--tiny", "--variants", "default,pdl",
                    "--json", str(out)).stdout
    results = json.loads(out.read_text())["tiny"]
    # on a loaded CPU the prefill subtracted from the loop is as long as the decode itself: the sign is noise
    assert sorted(results) == ["default", "pdl"] and all(math.isfinite(r["ms_per_step"]) for r in results.values())
    assert re.search(rf"^\| tiny \| default \| -?{NUMBER} \| -?nan% \| 1\.00x \|$", printed, re.M), printed
    assert re.search(rf"^\| tiny \| pdl \| -?{NUMBER} \| -?nan% \| -?{NUMBER}x \|$", printed, re.M), printed


def test_profile_step_tiny_tables_decode_graph_loop_and_learner():
    printed = bench("profile_step.py", "--device", "cpu", "--tiny", "--graph", "--top", "3").stdout
    assert re.search(rf"^decode: 4 rows, kv_len 32, every row at kv_len, default plan, eager launch {NUMBER} ms/step$",
                     printed, re.M), printed
    assert re.search(rf"^bytes per step {NUMBER} GB \(weights {NUMBER}\) in {NUMBER} ms of kernels: {NUMBER} TB/s$",
                     printed, re.M), printed
    assert re.search(rf"^graph replays: 4 rows, \d+ steps \(prefill included\), {NUMBER} ms/step wall$", printed, re.M)
    assert re.search(r"^learner: 4 rows x \d+ tokens, micro-batch 4, [\d.]+ s \([\d.e+]+ tokens/s\), peak n/a$",
                     printed, re.M), printed
    shares = [float(r[0].strip().rstrip("%")) for r in (line.strip("|").split("|") for line in printed.splitlines()
                                                 if re.match(r"^\| [\d.]+% \|", line))]
    assert len(shares) == 9 and all(0 < s <= 100 for s in shares)  # top 3 of each of the three tables
    assert "aten::mm" in printed


def test_profile_step_own_lengths_profiles_the_refilled_rows_step():
    printed = bench("profile_step.py", "--device", "cpu", "--tiny", "--own-lengths", "--skip-learner", "--top", "3").stdout
    # 4 rows, lengths uniform in [32 / 8, 32] (seed 0): the header names their mean
    assert re.search(rf"^decode: 4 rows, kv_len 32, own lengths \(mean \d+\), default plan, eager launch {NUMBER} ms/step$",
                     printed, re.M), printed
    assert "learner:" not in printed


def test_learner_compile_tiny_compiles_once_for_the_padded_width(tmp_path):
    printed = bench("learner_compile_bench.py", "--cache-dir", str(tmp_path), "--device", "cpu", "--tiny").stdout
    steps = re.findall(rf"^step (\d): width (\d+) -> (\d+), {NUMBER} s, compiling ({NUMBER}) s, loss", printed, re.M)
    assert [(s, w) for s, w, _, _ in steps] == [("1", "12"), ("2", "10"), ("3", "14")]
    assert len({padded for _, _, padded, _ in steps}) == 1  # one padded width: no recompilation
    assert float(steps[0][3]) > 0 and all(float(s[3]) == 0 for s in steps[1:])
    assert re.search(rf"^regions: \d+ Dynamo compilations, first update {NUMBER} s, median later update {NUMBER} s$",
                     printed, re.M), printed


def test_weight_publication_tiny_ends_in_the_ratios(tmp_path):
    out = tmp_path / "publication.md"
    bench("weight_publication_bench.py", "--tiny", "--repeats", "2", "--out", str(out))
    (row,) = rows(out.read_text(), "tiny (embedded default)")
    assert row[1].endswith(" M") and float(row[1][:-2]) > 0
    seconds = [float(c) for c in row[3:6]]
    assert all(s > 0 for s in seconds)
    # the ratios of the unrounded seconds; the table's seconds have 4 decimals of a few 0.1 ms
    assert [float(c.rstrip("x")) for c in row[6:]] == pytest.approx([seconds[1] / seconds[0],
                                                                      seconds[2] / seconds[0]], rel=0.4)


@pytest.mark.parametrize("script, flags, last", [
    ("misfit_bench.py", ("--runs", "2"), rf"^misfit test: {NUMBER} ms per run \(mean of \d+\)$"),
    ("prune_bench.py", ("--sweeps", "1"), rf"^\| ratio \| intervals / current reward \|( {NUMBER}x \|){{4}}$"),
    ("report_bench.py", ("--runs", "6", "--sweeps", "2", "--loo-sweeps", "1", "--train-lines", "20"),
     rf"^\| 6 \| 2 \| 20 \|( {NUMBER} \|){{5}}$"),
])
def test_statistics_benches_at_their_smallest_sizes(script, flags, last):
    printed = bench(script, *flags).stdout
    assert re.search(last, printed, re.M), printed[-3000:]
    if script == "misfit_bench.py":  # 5 truths x 2 draws x 3 drifts x 3 eval counts
        assert len([line for line in printed.splitlines() if re.match(r"^(sigmoid|power|step)", line)]) == 90


@pytest.mark.parametrize("script", ["multi_gpu_job.sh", "smollm2_study.sh", "device_queue.sh"])
def test_the_shell_benches_parse(script):
    """The GPU-only shell drivers, checked by bash without running them (``bash -n``); their tables' code runs on
    CPU runs in ``tests/integration/test_multi_rank_jobs.py``."""
    import subprocess

    from bench_runs import ROOT

    done = subprocess.run(["bash", "-n", str(ROOT / "bench" / script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_device_queue_runs_in_order_resumes_past_what_ended_and_packs(tmp_path):
    """bench/device_queue.sh on this machine: a queue of three commands (one fails) runs detached; ``wait``
    prints progress and packs logs, exit codes and results; a second ``start`` runs only the failed one again."""
    import subprocess
    import tarfile

    from bench_runs import ROOT

    queue = tmp_path / "queue.txt"
    queue.write_text("# results go to $RES\necho one > $RES/one.txt\n\ntest -f $RES/go\nsleep 3; echo three\n")
    env = {**os.environ, "WORK": str(tmp_path / "work"), "TICK": "1"}

    def stage(*args):
        done = subprocess.run(["bash", str(ROOT / "bench" / "device_queue.sh"), *args], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "3 commands" in stage("start", str(queue))
    printed = stage("wait", "60")
    assert "running 3: sleep 3; echo three" in printed
    assert [line for line in printed.splitlines() if ": exit " in line] == ["1: exit 0", "2: exit 1", "3: exit 0"]
    with tarfile.open(tmp_path / "work" / "out" / "queue.tar.gz") as packed:
        names = set(packed.getnames())
        assert {"queue/res/one.txt", "queue/1.rc", "queue/3.log"} <= names
        assert packed.extractfile("queue/3.log").read() == b"three\n"
    (tmp_path / "work" / "queue" / "res" / "go").touch()
    (tmp_path / "work" / "queue" / "3.log").write_text("kept\n")
    stage("start", str(queue))
    printed = stage("wait", "60")
    assert [line for line in printed.splitlines() if ": exit " in line] == ["1: exit 0", "2: exit 0", "3: exit 0"]
    assert (tmp_path / "work" / "queue" / "3.log").read_text() == "kept\n"  # ended with 0: not run again
