"""The schema is the reference: its defaults are what config.yaml composes, every field carries its
documentation and paper section, docs/configuration.md is generated from it, and the fields whose meaning
was split (CISPO's cap, each off-policy mode's k) refuse older configs in one line naming the field."""
from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any, Dict

import pytest
from omegaconf import OmegaConf

from rlscale.config import ConfigError, compose_run_config, load_run_config
from rlscale.config.reference import reference
from rlscale.config.registry import BY_FIELD
from rlscale.config.schema import RunConfig
from rlscale.runfolder.status import read_status
from rlscale.train.entry import train_run_dir

ROOT = Path(__file__).resolve().parents[3]


def flat(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """{dotted field: value} of a config tree (mappings of the schema's dict fields kept whole)."""
    if not isinstance(tree, dict) or prefix in ("task.dataset_kwargs.", "launcher.extra_sbatch."):
        return {prefix.rstrip("."): tree}
    return {key: value for name, sub in tree.items() for key, value in flat(sub, f"{prefix}{name}.").items()}


def test_the_composed_default_is_the_schema_default():
    composed = flat(OmegaConf.to_container(compose_run_config([])))
    schema = flat(OmegaConf.to_container(OmegaConf.structured(RunConfig), resolve=True))
    assert list(composed) == list(schema)
    assert {key: value for key, value in composed.items() if value != schema[key]} == {}


def leaf_fields(cls: type, prefix: str = ""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if "axis" in f.metadata:  # a section typed by its option: the fields of every option's class
            axis = BY_FIELD[f.metadata["axis"]]
            for name in axis.names:
                yield from leaf_fields(axis.config_class(name), f"{prefix}{f.name}.")
        elif dataclasses.is_dataclass(hints[f.name]):
            yield from leaf_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


def test_every_field_has_its_documentation_and_paper_section():
    fields = dict(leaf_fields(RunConfig))
    assert len(fields) > 90
    assert [name for name, f in fields.items() if len(f.metadata.get("doc", "")) < 8] == []
    assert [name for name, f in fields.items()
            if not re.fullmatch(r"(Sec\. \d(\.\d)?|App\. [A-Z](\.\d+)?)?", f.metadata["paper"])] == []
    assert fields["loss.cispo_cap"].metadata["paper"] == "Sec. 3.2"
    assert fields["offpolicy.max_lag"].metadata["paper"] == "Sec. 3.1"


def test_the_configuration_reference_is_up_to_date():
    text = reference()
    assert (ROOT / "docs" / "configuration.md").read_text() == text, (
        "docs/configuration.md is out of date: python -m rlscale.config.reference > docs/configuration.md")
    assert "| `loss.name` | `cispo` | `cispo` \\| `dapo` \\| `grpo` \\| `gspo` \\| `module:attribute` | Sec. 3.2 |" in text
    assert "| `offpolicy.batches_per_version` | `2` | integer, >= 0 | Sec. 3.1 |" in text
    assert "| `loss.cispo_cap` | `4.0` | number, > 0 | Sec. 3.2 |" in text  # under loss=cispo's own knobs
    # a launcher field that local lanes read too is not documented as SLURM's alone
    assert "| `launcher.gpus_per_node` | `0` | integer, >= 0 |  | GPUs per job (local: per lane; 0 there: one) |" in text
    assert "| `trainer.truncation_warn` | `0.1` |" in text and "rises back above this" in text


def test_cispo_caps_the_ratio_with_its_own_field():
    cfg = compose_run_config(["loss.cispo_cap=8"])
    assert (cfg.loss.name, cfg.loss.cispo_cap) == ("cispo", 8.0) and "eps_high" not in cfg.loss
    assert compose_run_config(["loss=dapo", "loss.eps_high=0.3"]).loss.eps_high == 0.3
    with pytest.raises(ConfigError, match=r"field 'loss.eps_high': loss.name=cispo has no such knob \(its knobs: "
                                          r"cispo_cap, kl_coef, tis_cap\); it is a knob of loss=dapo and loss=grpo"):
        compose_run_config(["loss.eps_high=5"])


def old_run_folder(tmp_path: Path, loss: Dict[str, Any], offpolicy: Dict[str, Any]) -> Path:
    """A run folder whose config.yaml has the default's values with older ``loss`` and ``offpolicy`` sections."""
    tree = OmegaConf.to_container(compose_run_config([f"out={tmp_path}"]))
    tree["loss"], tree["offpolicy"] = loss, offpolicy
    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml(tree))
    return tmp_path


OLD_CISPO = {"name": "cispo", "eps_low": 0.0, "eps_high": 4.0, "tis_cap": None, "kl_coef": 0.0}
NEW_PIPELINE = {"name": "pipeline", "max_lag": 2, "batches_per_version": 2, "num_generators": 1, "queue_size": 4,
                "update_every_tokens": 16}
OLD_PIPELINE = {"name": "pipeline", "k": 2, "num_generators": 1, "queue_size": 4, "update_every_tokens": 16}


def test_offpolicy_k_of_older_configs_says_where_each_meaning_went(tmp_path):
    with pytest.raises(ConfigError) as err:
        compose_run_config(["offpolicy.k=8"])
    message = str(err.value)
    assert "field 'offpolicy.k'" in message and "offpolicy.max_lag" in message and "\n" not in message
    assert "offpolicy.batches_per_version" in message
    folder = old_run_folder(tmp_path, dict(OLD_CISPO, eps_low=0.2, eps_high=0.28, cispo_cap=4.0), OLD_PIPELINE)
    with pytest.raises(ConfigError, match=r"config.yaml: field 'offpolicy.k': split by mode \(Sec. 3.1\): "):
        load_run_config(folder / "config.yaml")


def test_an_older_cispo_run_folder_fails_in_one_line_and_keeps_its_config(tmp_path):
    folder = old_run_folder(tmp_path, OLD_CISPO, NEW_PIPELINE)
    before = (folder / "config.yaml").read_text()
    assert train_run_dir(folder) == "failed"
    reason = read_status(folder)["reason"]
    assert "field 'loss.eps_low': loss.name=cispo has no such knob (its knobs: cispo_cap, kl_coef, tis_cap)" in reason
    assert "\n" not in reason
    assert (folder / "config.yaml").read_text() == before and not (folder / "metrics.jsonl").exists()
