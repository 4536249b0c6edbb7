"""A value that cannot train is refused before anything is written: by ``rlscale run``, ``rlscale run --cfg job``
and ``rlscale sweep --dry-run``, in one line naming the field, with no run folder, sweep state or sbatch file
left behind; and a run validates its config once in its process."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

import rlscale.config.validate
from rlscale.cli import app

REFUSED = [
    ("model.dtype=foo", "field 'model.dtype': must be one of float32, bfloat16, float16, got 'foo'"),
    ("batch.generations=1", "field 'batch.generations': must be >= 2, got 1"),
    ("loss.cispo_cap=0", "field 'loss.cispo_cap': must be > 0, got 0.0"),
]


@pytest.mark.parametrize("override, line", REFUSED, ids=[o for o, _ in REFUSED])
def test_refused_in_one_line_before_anything_is_written(tmp_path, monkeypatch, override, line):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in (["run", override, f"out={tmp_path / 'run'}"], ["run", "--cfg", "job", override],
                 ["sweep", "conf=loo", "--dry-run", "--results", str(tmp_path / "results"), "--sbatch-dir",
                  str(tmp_path / "sbatch"), override]):
        result = runner.invoke(app, args, env={"COLUMNS": "400"})
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and line in lines[0], (args, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run folder, results or sbatch script


def test_a_run_validates_its_config_once(tmp_path, monkeypatch):
    """``rlscale run`` composes and validates once and hands the run that config; resuming the folder to extend it
    reads and validates its config.yaml once."""
    calls = []
    real = rlscale.config.validate.validate
    monkeypatch.setattr(rlscale.config.validate, "validate", lambda cfg: calls.append(1) or real(cfg))
    run = tmp_path / "run"
    tiny = ["model.warmup_steps=2", "trainer.max_steps=1", "trainer.eval_every=1", "task.val_size=4",
            "task.train_size=16", "batch.prompts=2", "batch.generations=2", "offpolicy=ppo", "engine.threads=1",
            f"out={run}", f"cache_dir={tmp_path / 'cache'}"]
    runner = CliRunner()
    first = runner.invoke(app, ["run", *tiny])
    assert first.exit_code == 0, first.output
    assert len(calls) == 1
    extended = runner.invoke(app, ["run", "--run-dir", str(run), "trainer.max_steps=2"])
    assert extended.exit_code == 0, extended.output
    assert len(calls) == 2 and "trainer:\n  max_steps: 2\n" in (run / "config.yaml").read_text()


def test_a_shared_knob_of_one_option_is_left_out_of_the_variants_of_another(tmp_path):
    """``sweep conf=loo length.window=[10,12]``: the window of interruptions reaches the variants that interrupt;
    the variant length=penalty has no window, leaves it out and says so. A variant's own foreign knob is refused."""
    results = tmp_path / "results"
    result = CliRunner().invoke(app, ["sweep", "conf=loo", "--dry-run", "--results", str(results), "--sbatch-dir",
                                      str(tmp_path / "sbatch"), "length.window=[10,12]"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert ("note: variant length_penalty: length.window=[10,12] left out: field 'length.window': length.name=penalty "
            "has no such knob") in result.output
    assert "window:\n  - 10\n  - 12\n" in (results / "loo" / "scalerl_s0" / "config.yaml").read_text()
    assert "window" not in (results / "loo" / "length_penalty_s0" / "config.yaml").read_text().split("length:")[1]
    own = CliRunner().invoke(app, ["run", "--cfg", "job", "length=penalty", "length.window=[10,12]"])
    assert own.exit_code == 2 and "field 'length.window': length.name=penalty has no such knob" in own.output
