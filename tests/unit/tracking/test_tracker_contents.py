"""What a tracker holds besides the metrics: the run's resolved config (flat dotted parameters, MLflow's values
cut to its limit with a note, the YAML text) and each eval's completions table, whose markdown shows every cell as
written once TensorBoard renders it; a table size out of bounds is one line. W&B (offline) and MLflow (a file store)
are read back where installed (skipped otherwise)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlscale.config import ConfigError, compose_run_config, packages, typed
from rlscale.tracking import CompletionRow, completion_rows, open_tracker
from rlscale.tracking.params import (CUT_NOTE, MLFLOW_VALUE_CHARS, config_yaml, flat_params, hparam_values,
                                    mlflow_params)
from rlscale.train.components import tracked_run
from tests.tracker_tables import read_markdown_table

NASTY = CompletionRow(3, "What is 3+4? | x", "<b>7</b> *a* _b_ `c` \\ [l](u)\n# heading\n- item\n1. x\n```\n|", -1.0)


def test_the_config_is_flat_dotted_parameters():
    params = {"loss": {"name": "cispo", "eps": 0.2}, "length": {"window": [20, 24]}, "unread": {},
              "mixture": {"parts": [{"name": "a", "share": 1.0}]}, "seed": 0, "ok": True, "dir": None}
    assert flat_params(params) == {"loss.name": "cispo", "loss.eps": 0.2, "length.window": "[20, 24]", "unread": "{}",
                                   "mixture.parts": '[{"name": "a", "share": 1.0}]', "seed": 0, "ok": True,
                                   "dir": None}
    hparams = hparam_values(params)  # TensorBoard's: numbers, else text
    assert (hparams["seed"], hparams["loss.eps"], hparams["ok"], hparams["dir"]) == (0, 0.2, "true", "null")


def test_mlflow_params_are_text_cut_to_its_limit_with_a_note():
    long = "x" * (MLFLOW_VALUE_CHARS + 100)
    params, cut = mlflow_params({"a": {"b": long, "c": 3, "d": None}, "e": "y" * MLFLOW_VALUE_CHARS})
    assert cut == ["a.b"]
    assert len(params["a.b"]) == MLFLOW_VALUE_CHARS and params["a.b"].endswith(CUT_NOTE)
    assert params["a.b"].startswith("x" * (MLFLOW_VALUE_CHARS - len(CUT_NOTE)))
    assert (params["a.c"], params["a.d"], params["e"]) == ("3", "null", "y" * MLFLOW_VALUE_CHARS)  # at the limit: kept


def test_the_whole_run_config_flattens_and_reads_back_as_its_yaml():
    cfg = typed(compose_run_config(["logger=tensorboard", "loss=dapo"]))
    params = tracked_run(cfg, Path("r")).params
    flat = flat_params(params)
    assert flat["loss.name"] == "dapo" and flat["logger.completions_rows"] == 8 and flat["trainer.max_steps"] > 0
    assert all(isinstance(value, (str, int, float, bool, type(None))) for value in flat.values())
    assert yaml.safe_load(config_yaml(params)) == json.loads(json.dumps(params))


@pytest.mark.parametrize("rows", ["-1", "1001"])
def test_a_table_size_out_of_bounds_is_refused_in_one_line(rows):
    with pytest.raises(ConfigError, match=rf"field 'logger.completions_rows': must be in \[0, 1000\], got {rows}$"):
        compose_run_config(["logger=tensorboard", f"logger.completions_rows={rows}"])


def test_the_table_keeps_the_first_rows_of_an_eval():
    samples = [{"step": 4, "prompt": f"p{k}", "completion": f"c{k}", "reward": 1.0 if k % 2 else -1.0,
                "answer": None} for k in range(6)]
    assert completion_rows(samples, 2) == [CompletionRow(4, "p0", "c0", -1.0), CompletionRow(4, "p1", "c1", 1.0)]
    assert completion_rows(samples, 0) == [] and len(completion_rows(samples, 100)) == 6


def test_a_long_completion_keeps_its_beginning_and_its_answer():
    """A 50,000-character trace (the paper's lengths) keeps 2,000 characters at each end and says how many it cut;
    a completion at the limit is kept whole."""
    trace = "a" * 30000 + "b" * 19990 + "ANSWER=42"
    row = CompletionRow.of_sample({"step": 3, "prompt": "p", "completion": trace, "reward": 1.0})
    assert row.completion == "a" * 2000 + " [... 45,999 characters cut ...] " + "b" * 1991 + "ANSWER=42"
    whole = "c" * 4000
    assert CompletionRow.of_sample({"step": 3, "prompt": "p", "completion": whole, "reward": 1.0}).completion == whole


def test_a_completions_table_in_tensorboard_shows_every_cell_as_written(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = typed(compose_run_config(["logger=tensorboard"]))
    tracker = open_tracker(cfg.logger, tracked_run(cfg, tmp_path))
    tracker.completions(3, [NASTY, CompletionRow(3, "", "plain", 1.0)])
    tracker.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0}).Reload()
    [table] = events.Tensors("eval/completions/text_summary")
    assert table.step == 3
    header, rows = read_markdown_table(table.tensor_proto.string_val[0].decode())
    assert header == ["step", "prompt", "completion", "reward"]
    assert rows == [["3", NASTY.prompt, NASTY.completion, "-1.0"], ["3", "", "plain", "1.0"]]


def tracker_of(logger: str, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(packages, "installed", lambda module: True)
    cfg = typed(compose_run_config([f"logger={logger}", "logger.completions_rows=2"]))
    return cfg, open_tracker(cfg.logger, tracked_run(cfg, tmp_path))


def test_wandb_offline_holds_the_config_and_the_completions_table(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg, tracker = tracker_of("wandb", tmp_path, monkeypatch)
    tracker.write({"step": 0, "kind": "eval", "val_reward": 0.25})
    tracker.completions(0, [NASTY, CompletionRow(0, "p", "c", 1.0)])
    config = tracker.run.config.as_dict()  # an offline run's config is only in its binary .wandb log
    tracker.close()
    assert config["loss"]["name"] == cfg.loss.name and config["logger"]["completions_rows"] == 2
    assert config["trainer"] == tracked_run(cfg, tmp_path).params["trainer"]  # (W&B drops empty sections)
    [files] = (tmp_path / "wandb").glob("offline-run-*/files")
    [table] = files.glob("media/table/eval/completions_0_*.table.json")
    saved = json.loads(table.read_text())
    assert saved["columns"] == ["step", "prompt", "completion", "reward"]
    assert saved["data"] == [[3, NASTY.prompt, NASTY.completion, -1.0], [0, "p", "c", 1.0]]


def test_mlflow_holds_the_config_as_params_and_a_table_artifact_per_eval(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    cfg, tracker = tracker_of("mlflow", tmp_path, monkeypatch)
    tracker.write({"step": 0, "kind": "eval", "val_reward": 0.25})
    tracker.completions(0, [NASTY, CompletionRow(0, "p", "c", 1.0)])
    run_id = tracker.mlflow.active_run().info.run_id
    tracker.close()
    run = tracker.mlflow.MlflowClient().get_run(run_id)
    assert run.data.params["loss.name"] == cfg.loss.name and run.data.params["trainer.max_steps"] == str(
        cfg.trainer.max_steps)
    assert run.data.params == mlflow_params(tracked_run(cfg, tmp_path).params)[0]
    assert run.data.metrics["eval.val_reward"] == 0.25
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert yaml.safe_load((artifacts / "config.yaml").read_text())["loss"]["name"] == cfg.loss.name
    table = json.loads((artifacts / "completions" / "step_0000000.json").read_text())
    assert table["columns"] == ["step", "prompt", "completion", "reward"]
    assert table["data"] == [[3, NASTY.prompt, NASTY.completion, -1.0], [0, "p", "c", 1.0]]


def test_tensorboard_hparams_of_two_runs_compare_by_their_scalars(tmp_path):
    """TensorBoard's HParams tab, as its backend computes it: every run's flat config as hparams, and the runs'
    scalars as the metrics (no experiment summary is written, so TensorBoard takes them all)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    for seed in (1, 2):
        cfg = typed(compose_run_config(["logger=tensorboard", f"seed={seed}"]))
        (tmp_path / f"s{seed}").mkdir()
        tracker = open_tracker(cfg.logger, tracked_run(cfg, tmp_path / f"s{seed}"))
        tracker.write({"step": 0, "kind": "eval", "val_reward": 0.25 * seed})
        tracker.write({"step": 1, "kind": "train", "reward": 0.5})
        tracker.close()
    events = plugin_event_multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(str(tmp_path))
    events.Reload()
    provider = data_provider.MultiplexerDataProvider(events, str(tmp_path))
    hparams = backend_context.Context(base_plugin.TBContext(logdir=str(tmp_path), multiplexer=events,
                                                            data_provider=provider))
    request = context.RequestContext()
    experiment = hparams.experiment_from_metadata(request, "", True, hparams.hparams_metadata(request, ""),
                                                  hparams.hparams_from_data_provider(request, "", None))
    infos = {info.name: info for info in experiment.hparam_infos}
    assert len(infos) == len(flat_params(tracked_run(cfg, tmp_path).params))
    assert (infos["seed"].domain_interval.min_value, infos["seed"].domain_interval.max_value) == (1, 2)
    assert [info.name.tag for info in experiment.metric_infos] == ["eval/val_reward", "train/reward"]
