"""Sample completions in the report: the first and last eval of a run's samples.jsonl, escaped, with a torn
last line and odd records skipped."""
from __future__ import annotations

import json

from rlscale.report.build import write_report
from rlscale.report.content import load_report
from rlscale.report.samples import read_samples
from rlscale.testing.results_tree import synthetic_plan, write_results

MARKUP = "4+5=9</think><script>alert(1)</script> The answer is <b>9</b>."


def sample(step: int, completion: str = "The answer is 9.", correct: bool = True) -> dict:
    return {"step": step, "policy_version": step, "problem": 0, "prompt": "What is 4 + 5?", "completion": completion,
            "thinks": False, "answer": "9", "reference": "9", "correct": correct, "reward": 1.0 if correct else -1.0}


def write_samples(run_dir, records, tail: str = "") -> None:
    text = "".join(json.dumps(r) + "\n" for r in records)
    (run_dir / "samples.jsonl").write_text(text + tail)


def test_the_first_and_last_eval_are_read_and_bad_lines_skipped(tmp_path):
    records = [sample(0, "first"), sample(0, "first, second prompt"), sample(10, "middle"), sample(20, "last")]
    write_samples(tmp_path, records + [{"step": "x"}, ["not", "a", "record"]], tail='{"step": 30, "prom')
    shown, evals = read_samples(tmp_path)
    assert [(s.step, s.completion) for s in shown] == [(0, "first"), (0, "first, second prompt"), (20, "last")]
    assert evals == 3
    assert read_samples(tmp_path / "nowhere") == ([], 0)


def test_the_page_shows_each_runs_samples_escaped(tmp_path):
    root = tmp_path / "results"
    fits = write_results(root, synthetic_plan(n_runs=3, n_sweeps=1, n_loo_sweeps=0, edge_cases=False), n_train=5)
    run_dir = next(root.rglob("metrics.jsonl")).parent
    write_samples(run_dir, [sample(0, MARKUP, correct=False), sample(100)])
    page = write_report(load_report(root, fits), html=root / "report.html").html.read_text()
    assert "2 sample completions of the first and last eval (2 evals in samples.jsonl)" in page
    assert MARKUP not in page and "<script>" not in page
    assert "4+5=9&lt;/think&gt;&lt;script&gt;alert(1)&lt;/script&gt; The answer is &lt;b&gt;9&lt;/b&gt;." in page
    assert page.count('<details class="samples">') == 1  # only the run that has samples.jsonl
