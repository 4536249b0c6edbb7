"""A tiny run with ``logger=tensorboard``: its event files hold the resolved config (as text, the YAML of the run's
config.yaml, and as hparams) and at every eval a completions table whose rows are that eval's first samples
(prompt, completion, reward), read back with TensorBoard's own reader and markdown renderer; the table is sized
apart from samples.jsonl."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.tracker_tables import read_markdown_table

TINY = ["model.warmup_steps=2", "trainer.max_steps=2", "trainer.eval_every=1", "trainer.checkpoint_every=1",
        "task.val_size=4", "task.train_size=16", "trainer.eval_samples=1", "batch.prompts=2", "batch.generations=2",
        "offpolicy=ppo", "offpolicy.batches_per_version=1", "engine.threads=1"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def tensorboard_run(run: Path, cache: Path, *overrides: str):
    """The event files of a tiny run with ``logger=tensorboard`` and ``overrides``, read back."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", f"out={run}", f"cache_dir={cache}",
                           "logger=tensorboard", *overrides, *TINY], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0}).Reload()


def test_tensorboard_holds_the_config_and_a_completions_table_per_eval(tmp_path, cache):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    run = tmp_path / "run"
    events = tensorboard_run(run, cache, "logger.completions_rows=3")

    [config] = events.Tensors("config/text_summary")
    text = config.tensor_proto.string_val[0].decode()
    assert all(line.startswith("    ") or not line for line in text.splitlines())  # a code block: shown verbatim
    assert yaml.safe_load("\n".join(line[4:] for line in text.splitlines())) == yaml.safe_load(
        (run / "config.yaml").read_text())

    [event_file] = (run / "tensorboard").glob("events.out.tfevents.*")
    hparams = {}
    for event in EventFileLoader(str(event_file)).Load():
        for value in event.summary.value:
            if value.tag == "_hparams_/session_start_info":
                content = value.metadata.plugin_data.content
                hparams = dict(HParamsPluginData.FromString(content).session_start_info.hparams)
    assert hparams["trainer.max_steps"].number_value == 2
    assert hparams["logger.completions_rows"].number_value == 3
    assert hparams["offpolicy.name"].string_value == "ppo"

    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    tables = events.Tensors("eval/completions/text_summary")
    assert [t.step for t in tables] == [0, 1, 2]  # every eval
    for table in tables:
        header, rows = read_markdown_table(table.tensor_proto.string_val[0].decode())
        assert header == ["step", "prompt", "completion", "reward"]
        mine = [s for s in samples if s["step"] == table.step][:3]  # samples.jsonl keeps 4 per eval, the table 3
        assert len(mine) == 3 and all(s["prompt"] for s in mine)
        assert rows == [[str(s["step"]), s["prompt"].strip(), s["completion"].strip(), str(s["reward"])]
                        for s in mine]
    assert {s["reward"] for s in samples} <= {1.0, -1.0}


@pytest.mark.parametrize("rows, logged", [(0, 4), (4, 1)])
def test_the_table_and_samples_jsonl_are_sized_apart(tmp_path, cache, rows, logged):
    """``logger.completions_rows`` sizes the table (0: none), ``trainer.eval_samples_logged`` samples.jsonl."""
    run = tmp_path / "run"
    events = tensorboard_run(run, cache, f"logger.completions_rows={rows}", f"trainer.eval_samples_logged={logged}")
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [step for step in (0, 1, 2) for _ in range(logged)]
    assert [e.step for e in events.Scalars("eval/val_reward")] == [0, 1, 2]
    if not rows:
        assert sorted(events.Tags()["tensors"]) == ["config/text_summary"]  # the config, no table
        return
    for table in events.Tensors("eval/completions/text_summary"):
        _, table_rows = read_markdown_table(table.tensor_proto.string_val[0].decode())
        assert len(table_rows) == rows  # the 4 held-out prompts
        [first] = [s for s in samples if s["step"] == table.step]
        assert table_rows[0][1:3] == [first["prompt"].strip(), first["completion"].strip()]
