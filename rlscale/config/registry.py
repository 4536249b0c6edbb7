"""The names every design axis accepts, in one place.

Validation (``rlscale.config.validate``), the dispatch tables of the code that acts on a choice
(``Axis.dispatch``), ``rlscale run --help`` and the configuration reference (``docs/configuration.md``)
read them from here; a test checks that each config group's files under ``rlscale/conf`` offer the same
names. Section numbers refer to "The Art of Scaling Reinforcement Learning Compute for LLMs"
(arXiv 2510.13786). This module imports nothing of rlscale, so anything may import it.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Axis:
    """The values one config field accepts, each with its meaning.

    field:   the dotted config field, ``loss.name``.
    options: name -> one line saying what it selects.
    group:   the config group whose files select a value (each file of ``rlscale/conf/<group>/`` sets
             ``field`` to one of ``options``, and every option is set by one file at least); None when
             the field is set directly.
    presets: the group's files are presets with names of their own (``model=smollm2`` sets
             ``model.name=hf``); otherwise each file is named by the option it selects (``loss=dapo``).
    """

    field: str
    options: Mapping[str, str]
    group: Optional[str] = None
    presets: bool = False

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self.options)

    def problem(self, value: Any) -> Optional[str]:
        """The one-line complaint about ``value``, None when it is one of the names."""
        if value in self.options:
            return None
        return f"field '{self.field}': '{value}' is not one of {', '.join(self.names)}"

    def check(self, value: Any) -> None:
        """Raise ValueError with ``problem``'s line unless ``value`` is one of the names."""
        problem = self.problem(value)
        if problem:
            raise ValueError(problem)

    def dispatch(self, table: Mapping[str, T]) -> Mapping[str, T]:
        """``table`` (one implementation per name), read-only, once it is checked to cover exactly these
        names: code that acts on a choice builds its table through this, so a name added here without an
        implementation (or the reverse) fails at import."""
        if set(table) != set(self.options):
            raise TypeError(f"{self.field}: the implementations {sorted(table)} are not the names "
                            f"{sorted(self.options)}")
        return MappingProxyType(dict(table))


LOSS = Axis("loss.name", {
    "cispo": "-sg(min(rho, cispo_cap)) A log pi: truncated IS weight, gradient through log pi (ScaleRL, Sec. 3.2)",
    "dapo": "PPO-clip with DAPO's asymmetric clip [1 - eps_low, 1 + eps_high] (Section-2 baseline)",
    "grpo": "PPO-clip with GRPO's symmetric clip [1 - 0.2, 1 + 0.2] (Sec. 3.2)",
    "gspo": "PPO-clip on the sequence ratio, the geometric mean of the token ratios, eps ~4e-3 (Sec. 3.2)",
}, group="loss")
AGGREGATION = Axis("aggregation.name", {
    "prompt": "token mean within each prompt's group, then mean over prompts (ScaleRL, Sec. 3.2)",
    "sample": "token mean of each sequence, then mean over sequences (Section-2 baseline)",
    "token": "mean over all tokens of the batch (DAPO)",
}, group="aggregation")
NORMALIZATION = Axis("normalization.name", {
    "batch": "A_i / std of all advantages of the batch (ScaleRL, Sec. 3.2)",
    "group": "A_i / (std of the prompt's group + eps) (GRPO, Section-2 baseline)",
    "none": "A_i = r_i - mean(group), not divided (Dr. GRPO)",
}, group="normalization")
PRECISION = Axis("precision.name", {
    "fp32_head": "LM head in FP32 on the generator and the trainer (ScaleRL, Sec. 3.2)",
    "bf16_head": "LM head in bf16 (Section-2 baseline)",
}, group="precision")
FILTERING = Axis("filtering.name", {
    "zero_variance": "prompts whose rewards are all equal leave the loss (ScaleRL, Sec. 3.2)",
    "dynamic_sampling": "DAPO dynamic sampling: resample to refill the batch with non-zero-variance groups",
    "none": "no filtering (Section-2 baseline)",
}, group="filtering")
CURRICULUM = Axis("curriculum.name", {
    "no_positive_resampling": "prompts whose pass rate reaches the threshold leave the pool for good "
                              "(ScaleRL, Sec. 3.2)",
    "uniform": "uniform resampling of the whole pool (Section-2 baseline)",
}, group="curriculum")
LENGTH = Axis("length.name", {
    "interruption": "the think trace is cut at a random length in the window, then the answer follows "
                    "(ScaleRL, Sec. 3.2)",
    "penalty": "DAPO overlong penalty on correct traces (Sec. 3.2)",
    "none": "no length control: the budgets alone truncate",
}, group="length")
OFFPOLICY = Axis("offpolicy.name", {
    "pipeline": "PipelineRL-k: streaming generators, weights updated in flight (ScaleRL, Sec. 3.1)",
    "ppo": "PPO-off-policy-k: k batches generated with one policy, then k updates (Section-2 baseline, Sec. 3.1)",
}, group="offpolicy")
MODEL = Axis("model.name", {
    "tiny": "a small Llama with a character tokenizer, warmed up by a cached supervised phase",
    "hf": "a local Hugging Face checkpoint directory (Llama, Qwen2/Qwen3) or GGUF file",
}, group="model", presets=True)
TASK = Axis("task.name", {
    "reasoning_gym": "a reasoning-gym task by name, with its own verifier",
    "math": "math problems from local jsonl/parquet files, scored with Math-Verify (Sec. 2)",
}, group="task", presets=True)
ANSWER_FORMAT = Axis("task.answer_format", {
    "exact": "the whole answer text goes to the task's verifier",
    "tagged": "the prompt asks for `<answer>...</answer>`; the last such tag goes to the task's verifier",
    "math_verify": "Math-Verify compares the answer text with the reference (Sec. 2)",
})
GENERATOR = Axis("engine.generator", {
    "torch": "native torch decoding with a KV cache",
    "vllm": "vLLM engine in each generator process (optional extra)",
}, group="engine", presets=True)
LEARNER = Axis("engine.learner", {
    "torch": "plain torch optimizer step",
    "deepspeed": "DeepSpeed ZeRO (engine.zero_stage)",
}, group="engine", presets=True)
DEVICE = Axis("engine.device", {
    "auto": "CUDA when this process sees a GPU, else the CPU",
    "cpu": "the CPU",
    "cuda": "the GPU(s) of this process",
})
LAUNCHER = Axis("launcher.name", {
    "local": "submitit's local executor on this machine",
    "slurm": "submitit SLURM job arrays (or the generated sbatch scripts)",
}, group="launcher")
LOGGER = Axis("logger.name", {
    "none": "metrics.jsonl only",
    "tensorboard": "every metrics line mirrored to TensorBoard event files",
    "wandb": "every metrics line mirrored to Weights & Biases",
    "mlflow": "every metrics line mirrored to MLflow",
}, group="logger")
LOGGER_MODE = Axis("logger.mode", {
    "offline": "W&B writes locally",
    "online": "W&B syncs to its server",
    "disabled": "W&B does nothing",
})

AXES: Tuple[Axis, ...] = (LOSS, AGGREGATION, NORMALIZATION, PRECISION, FILTERING, CURRICULUM, LENGTH, OFFPOLICY,
                          MODEL, TASK, ANSWER_FORMAT, GENERATOR, LEARNER, DEVICE, LAUNCHER, LOGGER, LOGGER_MODE)
BY_FIELD: Mapping[str, Axis] = MappingProxyType({axis.field: axis for axis in AXES})


def axes_help() -> str:
    """Every axis as ``rlscale run --help`` lists it: ``loss=cispo|dapo|grpo|gspo`` where the group's files
    are named by the option, else the field: ``model.name=tiny|hf``."""
    axes = (f"{axis.group if axis.group and not axis.presets else axis.field}={'|'.join(axis.names)}" for axis in AXES)
    return "Config values (docs/configuration.md): " + "; ".join(axes) + "."
