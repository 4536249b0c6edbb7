"""The names every design axis accepts, and the code each selects, in one place.

Validation (``rlscale.config.validate``), the code that acts on a choice (``Axis.load``: the option's factory,
imported when it is chosen), ``rlscale run --help`` and the configuration reference (``docs/configuration.md``)
read them from here; a test checks that each config group's files under ``conf`` offer the same
names. ``loss.name`` and ``task.name`` also take a plug-in, ``module:attribute`` (``docs/extending.md``). Section
numbers refer to "The Art of Scaling Reinforcement Learning Compute for LLMs" (arXiv 2510.13786). This module
imports nothing of rlscale but the registry type, so anything may import it.

The options of the axes of ``rlscale.rl`` (loss, aggregation, normalization, curriculum, length) are tables in the
modules of their code (``rlscale.rl.losses:LOSSES``, ...). Every axis of ``TYPED_BY_OPTION`` has a config class
per option, beside its code: adding an option touches its module and its ``conf/`` file.

What each axis's factories are called with:

- loss: ``(tokens: LossTokens, spec: LossConfig) -> PolicyTerm``, a ``rlscale.rl.losses.PolicyLoss``, its config
  class the annotation of ``spec``;
- aggregation: ``(lengths, groups) -> denominators`` (``rlscale.rl.aggregation:AGGREGATIONS``);
- normalization: ``(centered, groups, cfg: NormalizationConfig) -> advantages``
  (``rlscale.rl.advantages:NORMALIZATIONS``), its config class the annotation of ``cfg``;
- curriculum: ``(num_prompts, cfg: CurriculumConfig) -> NoPositiveResamplingPool``, its config class the
  annotation of ``cfg``;
- length: ``(rewards, lengths, correct, cfg: LengthConfig) -> rewards`` (the reward shaping; the generators
  read ``interruption`` themselves), its config class the annotation of ``cfg``;
- offpolicy: ``(cfg: OffpolicyConfig, inputs: SourceInputs) -> RolloutSource``, its config class the one each
  option names (``rlscale.train.offpolicy.configs``), the annotation of ``cfg`` too;
- model: ``(cfg: ModelConfig, inputs: PolicyInputs) -> (model, tokenizer)``, the tokenizer's ``think`` saying
  whether the model knows a thinking turn, its config class the one each option names
  (``rlscale.engines.models.configs``);
- task: ``(cfg: TaskConfig) -> Task``, a ``rlscale.tasks.base.Task`` class (``mixture`` builds its parts so), its
  config class the annotation of ``cfg`` in its ``__init__`` (``mixture``'s the one it names), which also types the
  task of each ``mixture.parts`` entry and ``eval.downstream`` set;
- engine.generator: ``(settings: GeneratorSettings, model, tok, device) -> Generator``;
- engine.learner: ``(settings: LearnerSettings, model, ref_model) -> Learner``;
- engine.device: ``() -> torch.device``;
- launcher: no code; ``rlscale.sweep.dispatch`` reads the name, and the config class each option names
  (``rlscale.sweep.launchers``) types the section;
- logger: ``(cfg: LoggerConfig, run: TrackedRun) -> Tracker or None`` (a metrics sink that also takes each eval's
  completions table), its config class the one each option names (``rlscale.tracking.sinks``).
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Mapping, Tuple

from rlscale.config.axis import Axis, Option, PlugIn, resolve

LOSS = Axis("loss.name", "rlscale.rl.losses:LOSSES", group="loss",
            plugin=PlugIn("rlscale.rl.losses:PolicyLoss",
                          doc="a loss function of your own, a `PolicyLoss` ([extending.md](extending.md))",
                          entry_points="rlscale.losses"),
            config=("spec", "rlscale.rl.losses:LossConfig"))
AGGREGATION = Axis("aggregation.name", "rlscale.rl.aggregation:AGGREGATIONS", group="aggregation")
NORMALIZATION = Axis("normalization.name", "rlscale.rl.advantages:NORMALIZATIONS", group="normalization",
                     config=("cfg", "rlscale.rl.advantages:NormalizationConfig"))
PRECISION = Axis("precision.name", {  # labels: precision.lm_head_fp32 acts
    "fp32_head": Option("LM head in FP32 on the generator and the trainer (ScaleRL, Sec. 3.2)"),
    "bf16_head": Option("LM head in bf16 (Section-2 baseline)"),
}, group="precision")
FILTERING = Axis("filtering.name", {  # labels: filtering.zero_variance and filtering.dynamic_sampling act
    "zero_variance": Option("prompts whose rewards are all equal leave the loss (ScaleRL, Sec. 3.2)"),
    "dynamic_sampling": Option("DAPO dynamic sampling: resample to refill the batch with non-zero-variance groups"),
    "none": Option("no filtering (Section-2 baseline)"),
}, group="filtering")
CURRICULUM = Axis("curriculum.name", "rlscale.rl.curriculum:CURRICULA", group="curriculum",
                  config=("cfg", "rlscale.rl.curriculum:CurriculumConfig"))
LENGTH = Axis("length.name", "rlscale.rl.length:LENGTHS", group="length",  # the generators read interruption's knobs
              config=("cfg", "rlscale.rl.length:LengthConfig"))
OFFPOLICY = Axis("offpolicy.name", {
    "pipeline": Option("PipelineRL-k: streaming generators, weights updated in flight (ScaleRL, Sec. 3.1)",
                       "rlscale.train.offpolicy.pipeline:PipelineSource.from_config",
                       "rlscale.train.offpolicy.configs:PipelineConfig"),
    "ppo": Option("PPO-off-policy-k: k batches generated with one policy, then k updates (Section-2 baseline, "
                  "Sec. 3.1)", "rlscale.train.offpolicy.ppo:PPOOffPolicySource.from_config",
                  "rlscale.train.offpolicy.configs:PPOConfig"),
}, group="offpolicy", config=("cfg", "rlscale.train.offpolicy.configs:OffpolicyConfig"))
MODEL = Axis("model.name", {
    "tiny": Option("a small Llama with a character tokenizer, warmed up by a cached supervised phase",
                   "rlscale.engines.models.tiny_model:tiny_policy", "rlscale.engines.models.configs:TinyModelConfig"),
    "hf": Option("a local Hugging Face checkpoint directory (Llama, Qwen2/Qwen3) or GGUF file",
                 "rlscale.engines.models.hf_model:hf_policy", "rlscale.engines.models.configs:HFModelConfig"),
}, group="model", presets=True, config=("cfg", "rlscale.engines.models.configs:ModelConfig"))
TASK = Axis("task.name", {
    "reasoning_gym": Option("a reasoning-gym task by name, with its own verifier",
                            "rlscale.tasks.reasoning_gym:ReasoningGymTask"),
    "math": Option("math problems from local jsonl/parquet files, scored with Math-Verify (Sec. 2)",
                   "rlscale.tasks.math:MathTask"),
    "code": Option("small Python functions, scored by running the answer on hidden tests in a sandbox",
                   "rlscale.tasks.code:CodeTask"),
    "mixture": Option("several tasks trained together, `mixture.parts`, each scored by its own task and answer "
                      "format (`rlscale.tasks.mixture`)", config="rlscale.tasks.mixture:MixtureTaskConfig"),
}, group="task", presets=True, plugin=PlugIn("rlscale.tasks.base:Task", built_from=("cfg",), doc="a `Task` class of "
                                              "your own, built from its task config ([extending.md](extending.md))"),
            config=("cfg", "rlscale.tasks.base:TaskConfig"))
ANSWER_FORMAT = Axis("task.answer_format", {  # read by rlscale.tasks.answer_format.AnswerFormat
    "exact": Option("the whole answer text goes to the task's verifier"),
    "tagged": Option("the prompt asks for `<answer>...</answer>`; the last such tag goes to the task's verifier"),
    "math_verify": Option("Math-Verify compares the answer text with the reference (Sec. 2)"),
})
GENERATOR = Axis("engine.generator", {
    "torch": Option("native torch decoding with a KV cache",
                    "rlscale.engines.generators.torch_generator:TorchGenerator.from_settings"),
    "vllm": Option("vLLM engine in each generator process (optional extra)",
                   "rlscale.engines.generators.vllm_generator:VLLMGenerator.from_settings"),
}, group="engine", presets=True)
LEARNER = Axis("engine.learner", {
    "torch": Option("plain torch optimizer step", "rlscale.engines.learners.torch_learner:TorchLearner"),
    "deepspeed": Option("DeepSpeed ZeRO (engine.zero_stage)",
                        "rlscale.engines.learners.deepspeed_learner:DeepSpeedLearner"),
}, group="engine", presets=True)
DEVICE = Axis("engine.device", {
    "auto": Option("CUDA when this process sees a GPU, else the CPU", "rlscale.train.components:auto_device"),
    "cpu": Option("the CPU", "rlscale.train.components:cpu_device"),
    "cuda": Option("the GPU(s) of this process", "rlscale.train.components:cuda_device"),
})
LAUNCHER = Axis("launcher.name", {  # read by rlscale.sweep.dispatch
    "local": Option("submitit's local executor on this machine", config="rlscale.sweep.launchers:LocalConfig"),
    "slurm": Option("submitit SLURM job arrays (or the generated sbatch scripts)",
                    config="rlscale.sweep.launchers:SlurmConfig"),
}, group="launcher", config=("cfg", "rlscale.sweep.launchers:LauncherConfig"))
LOGGER = Axis("logger.name", {
    "none": Option("metrics.jsonl only", "rlscale.tracking.sinks:no_tracker", "rlscale.tracking.sinks:LoggerConfig"),
    "tensorboard": Option("every metrics line, the config and completions tables in TensorBoard event files",
                          "rlscale.tracking.sinks:tensorboard_sink", "rlscale.tracking.sinks:TensorboardConfig"),
    "wandb": Option("every metrics line, the config and completions tables in Weights & Biases",
                    "rlscale.tracking.sinks:WandbSink", "rlscale.tracking.sinks:WandbConfig"),
    "mlflow": Option("every metrics line, the config and completions tables in MLflow",
                     "rlscale.tracking.sinks:MlflowSink", "rlscale.tracking.sinks:MlflowConfig"),
}, group="logger", config=("cfg", "rlscale.tracking.sinks:LoggerConfig"))
LOGGER_MODE = Axis("logger.mode", {  # passed to W&B; only logger=wandb has the field
    "offline": Option("W&B writes locally"),
    "online": Option("W&B syncs to its server"),
    "disabled": Option("W&B does nothing"),
})

TYPED_BY_OPTION: Tuple[Axis, ...] = (LOSS, NORMALIZATION, CURRICULUM, LENGTH, OFFPOLICY, MODEL, TASK, LAUNCHER,
                                     LOGGER)
"""The axes whose section is typed by the chosen option's config class (``Axis.config``)."""
AXES: Tuple[Axis, ...] = (LOSS, AGGREGATION, NORMALIZATION, PRECISION, FILTERING, CURRICULUM, LENGTH, OFFPOLICY,
                          MODEL, TASK, ANSWER_FORMAT, GENERATOR, LEARNER, DEVICE, LAUNCHER, LOGGER, LOGGER_MODE)
BY_FIELD: Mapping[str, Axis] = MappingProxyType({axis.field: axis for axis in AXES})


def axes_help() -> str:
    """Every axis as ``rlscale run --help`` lists it: ``loss=cispo|dapo|grpo|gspo`` where the group's files
    are named by the option, else the field: ``model.name=tiny|hf``; an axis that takes plug-ins adds
    ``or loss.name=MODULE:ATTRIBUTE`` and the plug-ins installed packages offer, with their own knobs."""
    axes = (f"{axis.group if axis.group and not axis.presets else axis.field}={'|'.join(axis.names)}"
            + (f" or {axis.field}=MODULE:ATTRIBUTE" if axis.plugin else "") + _installed_help(axis) for axis in AXES)
    return "Config values: " + "; ".join(axes) + "."


def _installed_help(axis: Axis) -> str:
    """`` (installed: loss.name=clipped with loss.clip, ...)``: the installed plug-ins of ``axis`` and the knobs
    their config classes add, or "" (no brackets: --help's rich text would read them as markup)."""
    installed = axis.plugin.installed() if axis.plugin else {}
    if not installed:
        return ""
    base = {f.name for f in dataclasses.fields(resolve(axis.config[1]))} if axis.config else set()

    def knobs(name: str) -> str:
        if axis.config is None or axis.problem(name):
            return ""
        own = [f"{axis.section}.{f.name}" for f in dataclasses.fields(axis.config_class(name)) if f.name not in base]
        return f" with {' and '.join(own)}" if own else ""

    return " (installed: " + ", ".join(f"{axis.field}={name}{knobs(name)}" for name in installed) + ")"
