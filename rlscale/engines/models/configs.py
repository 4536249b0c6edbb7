"""The config class of each policy (``model=tiny|hf``), named by its option (``rlscale.config.registry.MODEL``): the
run's ``model`` section is typed by the one its ``name`` picks when the config is composed, so a tiny model's size
beside model=hf (``model.hidden_size``) is refused there. ``TinyModelConfig`` is read by
``rlscale.engines.models.tiny_model``, ``HFModelConfig`` by ``rlscale.engines.models.hf_model``; ``PolicyInputs``
is the rest of the run a policy is built from. This module imports no torch or transformers, so composing a config
loads neither model's code."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Tuple

from rlscale.knobs import knob

if TYPE_CHECKING:
    from rlscale.config.schema import MixturePart
    from rlscale.tasks.base import Task, TaskConfig

MODEL_NAME = ("the policy (``model=NAME``; ``model=smollm2`` is the ``hf`` preset of SmolLM2-135M): ``tiny``, a small "
              "Llama warmed up by a short deterministic supervised phase and cached by content hash, so every variant "
              "of a sweep starts from the same weights; ``hf``, a local Hugging Face checkpoint (``path``)")


@dataclass
class ModelConfig:
    """The policy: the embedded tiny Llama or a local Hugging Face checkpoint."""

    name: str = knob("tiny", MODEL_NAME)
    dtype: str = knob("float32", "parameter dtype (float32, bfloat16, float16); bf16 weights train with FP32 master "
                      "weights", one_of=("float32", "bfloat16", "float16"))


@dataclass
class TinyModelConfig(ModelConfig):
    """The tiny Llama's sizes and its supervised warm-up."""

    name: str = knob("tiny", MODEL_NAME)
    hidden_size: int = knob(128, "hidden size (a multiple of ``num_heads``)", gt=0)
    num_layers: int = knob(2, "decoder layers", gt=0)
    num_heads: int = knob(4, "attention heads", gt=0)
    intermediate_size: int = knob(256, "MLP width", gt=0)
    max_position_embeddings: int = knob(256, "longest sequence", gt=0)
    warmup_steps: int = knob(300, "steps of the supervised warm-up", ge=0)
    warmup_lr: float = knob(3.0e-3, "learning rate of the warm-up", gt=0)
    warmup_batch: int = knob(64, "sequences per warm-up step", gt=0)
    warmup_correct_fraction: float = knob(0.2, "fraction of warm-up demonstrations with the correct answer, so the "
                                          "warmed-up policy is right some of the time (R0 low, not zero)", ge=0, le=1)


@dataclass
class HFModelConfig(ModelConfig):
    """A local Hugging Face checkpoint (Llama, Qwen2/Qwen3) or GGUF file."""

    name: str = knob("hf", MODEL_NAME)
    path: Optional[str] = knob(None, "the checkpoint directory (or the name of a packaged GGUF model)")
    gguf_file: Optional[str] = knob(None, "the GGUF file inside ``path``, de-quantized on load")


@dataclass(frozen=True)
class PolicyInputs:
    """The parts of the run a policy is built from (``rlscale.train.components.build_policy``).

    task:      the run's task (a mixture's included), whose problems warm the tiny model up.
    task_cfg:  its config (the tiny warm-up's seed and cache key).
    parts:     a mixture's parts (``mixture.parts``), empty for one task.
    phrase:    the interruption phrase (``length.phrase``), which every tokenizer knows.
    cache_dir: where warmed-up tiny models and de-quantized GGUF copies are kept (``cache_dir``).
    """

    task: "Task"
    task_cfg: "TaskConfig"
    parts: Tuple["MixturePart", ...]
    phrase: str
    cache_dir: Path
