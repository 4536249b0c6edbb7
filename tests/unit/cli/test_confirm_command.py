"""``rlscale confirm``'s refusals: one line naming the argument at fault, exit status 2, nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlscale.cli import app
from rlscale.testing.curves import TABLE1, synthetic_curve, write_run

SETTING = {"variant": "scalerl", "tier": 1, "predicted": 0.6, "lo": 0.59, "hi": 0.61, "seeds": 3, "identified": True,
           "setting": {}, "seen": [{"seed": s, "up_to": 8000.0} for s in range(3)],
           "new_seeds": {"k": 3, "evals": 3, "mean": 0.6, "lo": 0.57, "hi": 0.63, "seen": 3, "sd": 0.01, "df": 6,
                         "eval_se": 0.01, "reason": ""}}
PLAN = {"x": "gpu_hours", "y": "val_reward", "margin": 0.02, "ci_level": 0.95,
        "sweeps": [{"sweep": "sweep_a", "budget": 16000.0, "x": "gpu_hours", "best": ["scalerl"],
                    "variants": [SETTING], "crossovers": [], "scaling_keys": [], "best_setting": [],
                    "observed_min": 8000.0, "observed_max": 8000.0, "warning": ""}]}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder whose only run (sweep_b/scalerl_s10) matches no setting of PLAN."""
    root = tmp_path_factory.mktemp("confirm") / "results"
    x, y = synthetic_curve(TABLE1["scalerl"], 20, 0.01, np.random.default_rng(0))
    write_run(root / "sweep_b" / "scalerl_s10", x, y, seed=10)
    return root


def _refused(*args: str) -> str:
    out = CliRunner().invoke(app, ["confirm", *args])
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1, out.output
    return out.output.strip()


def _plan_file(tmp_path: Path, content) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_a_missing_plan_is_named(tmp_path, results):
    missing = tmp_path / "nope.json"
    assert _refused(str(missing), str(results)) == f"error: PLAN_JSON {missing}: no such file"


@pytest.mark.parametrize("content, says", [
    ("{not json", "not JSON: not a plan.json"),
    ({"runs": []}, "not a plan.json of rlscale plan"),
    ({**PLAN, "sweeps": [{**PLAN["sweeps"][0], "variants": [{k: v for k, v in SETTING.items() if k != "seen"}]}]},
     "a plan without the seeds it saw and its new-seed predictions; rerun rlscale plan"),
    ({**PLAN, "sweeps": [{**PLAN["sweeps"][0], "variants": 3}]},
     "a plan without the seeds it saw and its new-seed predictions; rerun rlscale plan"),
    ({k: v for k, v in PLAN.items() if k != "margin"}, "not a plan.json of rlscale plan"),
])
def test_a_file_that_is_not_a_plan_is_named(tmp_path, results, content, says):
    path = _plan_file(tmp_path, content)
    assert _refused(str(path), str(results)) == f"error: PLAN_JSON {path}: {says}"


def test_a_missing_results_folder_is_named(tmp_path, results):
    path = _plan_file(tmp_path, PLAN)
    gone = tmp_path / "gone"
    assert _refused(str(path), str(results), str(gone)) == f"error: RESULTS {gone}: no such folder"


def test_results_without_a_run_of_the_plan_are_refused(tmp_path, results):
    path = _plan_file(tmp_path, PLAN)
    said = _refused(str(path), str(results))
    assert said == f"error: RESULTS {results}: no run matches a setting of the plan (its sweeps: sweep_a)"
    assert not (results / "confirm.json").exists()
