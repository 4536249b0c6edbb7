"""``rlscale run`` trains the embedded tiny model with a plug-in loss and a plug-in task from a package of the
user's (tests/plugin_package.py) on PYTHONPATH: the run ends done, its samples are the plug-in task's prompts and
its train lines carry the ratio only the plug-in loss reports; a plug-in loss with a knob of its own, selected by
the name its package's entry point gives it, trains with the knob's value."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from plugin_package import REPORTED_RATIO, write_entry_points, write_plugins

pytestmark = pytest.mark.slow

TINY = ["model.warmup_steps=2", "trainer.max_steps=3", "trainer.eval_every=1", "task.val_size=4",
        "task.train_size=16", "trainer.eval_samples=1", "batch.prompts=2", "batch.generations=2", "offpolicy=ppo",
        "offpolicy.batches_per_version=1", "filtering=none", "engine.threads=1"]
PLUGINS = ["loss.name=plugs.losses:reinforce", "task.name=plugs.tasks:Halving"]


def test_rlscale_run_trains_with_a_plugin_loss_and_task(tmp_path):
    root = write_plugins(tmp_path / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", *TINY, *PLUGINS, f"out={run_dir}",
                           f"cache_dir={tmp_path / 'cache'}"], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "done"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (config["loss"]["name"], config["task"]["name"]) == ("plugs.losses:reinforce", "plugs.tasks:Halving")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["prompt"].startswith("half of ") for s in samples)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3]
    assert all(r["ratio_mean"] == REPORTED_RATIO for r in train)


def test_rlscale_run_trains_an_installed_plugin_loss_with_its_knob(tmp_path):
    root = write_plugins(tmp_path / "src")
    write_entry_points(root, "rlscale.losses", {"clipped_reinforce": "plugs.losses:clipped_reinforce"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rlscale.cli", "run", *TINY, "loss.name=clipped_reinforce",
                           "loss.clip=0.25", f"out={run_dir}", f"cache_dir={tmp_path / 'cache'}"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["loss"] == {"name": "clipped_reinforce", "tis_cap": None, "kl_coef": 0.0, "clip": 0.25}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["ratio_mean"] for r in records if r["kind"] == "train"] == [0.25, 0.25, 0.25]  # the knob reached it
