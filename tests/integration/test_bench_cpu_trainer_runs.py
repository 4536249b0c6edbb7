"""The benchmarks of ``bench/`` that train the embedded default end to end, in their CPU modes (two evaluations of
400 prompts a run at least: about 3 minutes on 2 cores), as CI runs them; the others are
``tests/unit/test_bench_cpu_modes.py``."""
from __future__ import annotations

import json
import re

import pytest
from omegaconf import OmegaConf

from bench_runs import NUMBER, bench
from rlscale.config import compose_run_config


@pytest.mark.slow
def test_eta_bench_quick_times_the_sweeps_eta(tmp_path):
    out = tmp_path / "eta.md"
    bench("eta_bench.py", "--quick", "--out", str(out))
    text = out.read_text()
    assert "`rlscale sweep conf=loo trainer.max_steps=8 trainer.eval_every=2` --only scalerl --seeds 1: exit status 0" \
        in text
    assert re.search(rf"^\| \d+ \| 1 runs: 1 running \| \d+ \| \d+ \| {NUMBER} \|$", text, re.M), text
    assert re.search(rf"^first ETA / wall time from that line: \d+ s / \d+ s = {NUMBER}$", text, re.M), text


@pytest.mark.slow
def test_offpolicy_bench_short_runs_every_mode():
    printed = bench("offpolicy_bench.py", "--steps", "2", "--skip", "1", "--k", "2").stdout
    for mode in ("synchronous", "PPO-off-policy-2", "PipelineRL-2"):
        cells = re.search(rf"^{re.escape(mode)}\s+({NUMBER})\s+({NUMBER})\s+{NUMBER}\s+{NUMBER}\s+({NUMBER})\s+{NUMBER}$",
                          printed, re.M)
        assert cells is not None and float(cells.group(1)) > 0 and float(cells.group(2)) > 0, printed
    assert re.search(rf"^PipelineRL-2 / synchronous throughput: {NUMBER}x", printed, re.M), printed


@pytest.mark.slow
def test_train_cpu_quick_sets_the_default_against_the_synchronous_run():
    printed = bench("train_cpu.py", "--quick").stdout
    values = {m.group(1).strip(): m.group(2) for m in re.finditer(r"^(.{52})(.*)$", printed, re.M)}
    assert float(values["generation tokens/s (prompt+completion, 1 thr)"]) > 0
    assert float(values["training tokens/s (fwd+bwd, 1 thr)"]) > 0
    default, sync = (float(values[f"{name} wall s"]) for name in ("default run (ScaleRL, PipelineRL-2)",
                                                                   "baseline: synchronous run (PPO-1)"))
    assert float(values["ratio default / synchronous wall"]) == pytest.approx(default / sync, abs=0.01)
    r0, final = values["default run (ScaleRL, PipelineRL-2) R0 -> final"].split()
    assert 0 <= float(r0) <= 1 and 0 <= float(final) <= 1


@pytest.mark.slow
def test_start_timeline_marks_the_start_of_a_run_of_the_embedded_default(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    OmegaConf.save(compose_run_config([]), run_dir / "config.yaml")
    printed = bench("start_timeline.py", str(run_dir), str(tmp_path / "work"), "--steps", "2").stderr
    marks = re.findall(rf"^\s*({NUMBER}) s  (.*)$", printed, re.M)
    names = [what for _, what in marks]
    assert names[0] == "interpreter up" and names[-1].startswith("run ended done")
    assert any(n.startswith("learner step #1") for n in names) and any(n.startswith("update #2") for n in names)
    assert all(float(t) >= 0 for t, _ in marks)
    assert json.loads((tmp_path / "work" / "status.json").read_text())["state"] == "done"
