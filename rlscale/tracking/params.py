"""The run's resolved config as a tracker's parameters: one flat mapping of dotted keys (``loss.name``,
``trainer.max_steps``) to scalars, a list or an empty section written as its JSON text; and the whole config as
the YAML text of its config.yaml. TensorBoard takes the flat mapping as hparams (``hparam_values``), MLflow as
params (``mlflow_params``: each value as text, cut to ``MLFLOW_VALUE_CHARS``); W&B takes the nested config as it
is."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Tuple, Union

from omegaconf import OmegaConf

Scalar = Union[str, int, float, bool, None]

MLFLOW_VALUE_CHARS = 500
"""The longest parameter value every MLflow release since 1.x stores (newer ones take 6,000); a longer one is cut to
this length, ending in ``CUT_NOTE``."""
CUT_NOTE = "... (cut; the whole config is the run's config.yaml artifact)"


def flat_params(params: Mapping[str, Any], prefix: str = "") -> Dict[str, Scalar]:
    """``{"loss": {"name": "cispo"}}`` -> ``{"loss.name": "cispo"}``: every leaf by its dotted key, in the config's
    order; a list or an empty section is its JSON text (``length.window``: ``[20, 24]``)."""
    flat: Dict[str, Scalar] = {}
    for key, value in params.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_params(value, dotted + "."))
        elif value is None or isinstance(value, (str, int, float, bool)):
            flat[dotted] = value
        else:
            flat[dotted] = json.dumps(value, default=str)
    return flat


def as_text(value: Scalar) -> str:
    """A parameter's value as text: a string as it is, anything else as JSON (``null``, ``true``, ``0.001``)."""
    return value if isinstance(value, str) else json.dumps(value)


def hparam_values(params: Mapping[str, Any]) -> Dict[str, Union[str, int, float]]:
    """The flat parameters as TensorBoard hparams: numbers as they are, anything else (booleans too) as text."""
    return {key: value if isinstance(value, (int, float)) and not isinstance(value, bool) else as_text(value)
            for key, value in flat_params(params).items()}


def mlflow_params(params: Mapping[str, Any]) -> Tuple[Dict[str, str], List[str]]:
    """The flat parameters as text for ``mlflow.log_params``, each at most ``MLFLOW_VALUE_CHARS`` long, and the
    keys of those that were cut."""
    texts, cut = {}, []
    for key, value in flat_params(params).items():
        text = as_text(value)
        if len(text) > MLFLOW_VALUE_CHARS:
            text = text[:MLFLOW_VALUE_CHARS - len(CUT_NOTE)] + CUT_NOTE
            cut.append(key)
        texts[key] = text
    return texts, cut


def config_yaml(params: Mapping[str, Any]) -> str:
    """The config as the run's config.yaml writes it."""
    return OmegaConf.to_yaml(OmegaConf.create(dict(params)))
