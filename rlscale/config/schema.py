"""Typed schema of one run's configuration.

Hydra composes ``conf/config.yaml`` (the ScaleRL recipe) from one config group per design axis; the
composed tree is merged into these dataclasses, so an unknown key or a value of the wrong type fails
with the dotted name of the field at fault. The defaults here are the embedded default's values (a test
composes config.yaml and compares it with them field by field); the files of a config group set what
defines their option (``loss=dapo``'s clip range). Every field carries its documentation and the paper
section it implements (``knob``); ``python -m rlscale.config.reference`` writes them, with the names each
axis accepts (``rlscale.config.registry``), as ``docs/configuration.md``. Range checks that types cannot
express live in ``rlscale.config.validate``. Section numbers refer to "The Art of Scaling Reinforcement
Learning Compute for LLMs" (arXiv 2510.13786).
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Tuple

from rlscale.config.axis import Axis
from rlscale.config.registry import (CURRICULUM, LAUNCHER, LENGTH, LOGGER, LOSS, MODEL, NORMALIZATION, OFFPOLICY,
                                     TASK, TYPED_BY_OPTION)
from rlscale.knobs import knob

MAX_SEED = 2 ** 63 - 1  # torch.manual_seed takes a signed 64-bit integer


def option_default(axis: Axis, name: str, paper: str = "Sec. 3.2") -> Any:
    """A section typed by its option (``rlscale.config.registry.TYPED_BY_OPTION``), by default the config of
    ``name``, built from its class's defaults."""
    return field(default_factory=lambda: axis.config_class(name)(),
                 metadata={"doc": f"the option's own config class ({axis.field} names it; default {name})",
                           "paper": paper, "axis": axis.field})


@dataclass
class MixturePart:
    """One task of a mixture: its name (the suffix of its metrics, ``val_reward/<name>``), its share of the
    training prompts and its own task config, typed by its ``task.name`` as the run's ``task`` is (a knob of
    another task, ``mixture.parts.0.task.path`` on a reasoning_gym part, is refused naming the task that has it)."""

    name: str = knob("part", "the part's name, in its metrics: ``reward/<name>``, ``val_reward/<name>``")
    weight: float = knob(1.0, "its share of the RL pool's prompts, relative to the other parts' weights", gt=0)
    task: Any = option_default(TASK, "reasoning_gym", "Sec. 5")


@dataclass
class MixtureConfig:
    """Several tasks trained together in one run (``task.name=mixture``): the RL pool interleaves their
    training prompts by weight, each answer is scored by its own task and answer format, and the eval holds
    every part's held-out prompts, logged pooled (``val_reward``) and per part (``val_reward/<name>``)."""

    parts: List[MixturePart] = knob([], "the mixed tasks (``task.name=mixture`` needs at least two); see "
                                    "conf/task/math_code.yaml")


@dataclass
class AggregationConfig:
    """How per-token losses become one scalar."""

    name: str = knob("prompt", "the loss aggregation", "Sec. 3.2")


@dataclass
class PrecisionConfig:
    """Precision of the LM head."""

    name: str = knob("fp32_head", "the precision option (a label; ``lm_head_fp32`` acts)", "Sec. 3.2")
    lm_head_fp32: bool = knob(True, "compute the LM head's logits in FP32 on the generator and the trainer", "Sec. 3.2")


@dataclass
class FilteringConfig:
    """Zero-variance filtering and DAPO dynamic sampling."""

    name: str = knob("zero_variance", "the filtering option (a label; the two switches below act)", "Sec. 3.2")
    zero_variance: bool = knob(True, "drop prompts whose rewards are all equal from the loss (the effective batch "
                               "shrinks)", "Sec. 3.2")
    dynamic_sampling: bool = knob(False, "DAPO dynamic sampling: generate again to refill the batch with prompts "
                                  "whose rewards differ", "Sec. 3.2")
    max_rounds: int = knob(3, "dynamic sampling: extra generation rounds per step at most", ge=0)


@dataclass
class GenerationConfig:
    """Sampling budgets and temperature."""

    think: Any = knob("auto", "true | false | auto: with thinking on the assistant turn opens a ``<think>`` trace "
                      "and the answer is the text after ``</think>``; off, the prompt is rendered with thinking "
                      "disabled and the whole completion is the answer; auto: on for the tiny model and for chat "
                      "templates that know thinking")
    max_think_tokens: int = knob(24, "think budget in tokens (paper: 12,288)", "Sec. 2", gt=0)
    max_answer_tokens: int = knob(8, "answer budget in tokens after the think trace (paper: 2,048)", "Sec. 2", gt=0)
    temperature: float = knob(1.0, "sampling temperature of training and eval generations", gt=0)


OFFPOLICY_K = OFFPOLICY.table({"pipeline": "offpolicy.max_lag", "ppo": "offpolicy.batches_per_version"})
"""The field holding each off-policy mode's k (Sec. 3.1)."""


@dataclass
class BatchConfig:
    """The batch of one update (paper: 48 prompts x 16 generations = 768 sequences)."""

    prompts: int = knob(8, "prompts per update (paper: 48)", "Sec. 2", gt=0)
    generations: int = knob(8, "generations per prompt, the group of the advantage baseline (paper: 16); at least 2: "
                            "with one, every advantage r_i - mean(group) is 0 and nothing trains", "Sec. 2", ge=2)
    micro_batch: int = knob(0, "sequences per forward/backward in gradient accumulation (0 = the whole batch); the "
                            "objective does not change with it", ge=0)


@dataclass
class OptimConfig:
    """AdamW with a constant learning rate after a linear warm-up (paper: lr 5e-7, eps 1e-15, weight decay 0.01,
    100 warm-up steps)."""

    lr: float = knob(1.0e-4, "learning rate (paper: 5e-7; scaled for the tiny model)", "Sec. 2", gt=0)
    betas: List[float] = knob([0.9, 0.999], "AdamW betas", "Sec. 2", ge=0, lt=1)
    eps: float = knob(1.0e-15, "AdamW epsilon", "Sec. 2", ge=0)
    weight_decay: float = knob(0.01, "AdamW weight decay", "Sec. 2", ge=0)
    warmup_steps: int = knob(5, "steps of the linear learning-rate warm-up (paper: 100)", "Sec. 2", ge=0)
    grad_clip: float = knob(1.0, "gradient norm clip", gt=0)


@dataclass
class EngineConfig:
    """Backends of the generator and the learner."""

    generator: str = knob("torch", "the generator backend")
    learner: str = knob("torch", "the learner backend")
    zero_stage: int = knob(2, "deepspeed: the ZeRO stage", one_of=(0, 1, 2, 3))
    device: str = knob("auto", "where the run computes")
    threads: int = knob(0, "torch intra-op threads of the run (0 = leave as is); PipelineRL on CPU shares them "
                        "equally between the trainer and its generator processes", ge=0)
    compile: bool = knob(True, "on CUDA, torch.compile the torch learner's forward and backward and the torch "
                         "generator's per-layer decode work; no effect on CPU")
    activation_checkpointing: Any = knob("auto", "true | false | auto: the learners keep only each decoder layer's "
                                         "input for the backward and recompute the layer there (the same "
                                         "gradients for about a third more compute per update); auto: on when "
                                         "rlscale.engines.memory's estimate of the trainer GPU without it passes "
                                         "90 % of the card (one 14,865-token sequence of Qwen3-8B keeps 51 GiB of "
                                         "activations without it), so a run that fits keeps full speed; off on CPU")
    generator_rows: Any = knob("auto", "the torch generator on CUDA: rows it samples at once, each refilled with "
                               "the call's next pending prompt when its trace ends, so its KV cache holds these "
                               "rows at full length, not every row of the call; 0: every row at once, a static "
                               "batch until its longest trace ends; auto: every row when "
                               "rlscale.engines.memory's estimate fits 90 % of the GPU, else the most rows that "
                               "fit (a set number that does not fit is refused before the run samples)")


@dataclass
class TrainerConfig:
    """Loop length and cadence."""

    max_steps: int = knob(60, "optimizer steps of the run", gt=0)
    eval_every: int = knob(6, "steps between evals of the held-out split (and at step 0) (paper: every 100)", "Sec. 2",
                           gt=0)
    eval_samples: int = knob(1, "samples per held-out prompt in an eval (paper: 16)", "Sec. 2", gt=0)
    eval_samples_logged: int = knob(4, "completions of each eval written to the run's samples.jsonl (0 = none)", ge=0)
    checkpoint_every: int = knob(10, "steps between checkpoints", gt=0)
    truncation_warn: float = knob(0.10, "warn when the truncation rate rises back above this: its mean over the "
                                  "last 20 steps, after the run had held it 5 points or more below (the paper saw "
                                  "10-15 % destabilize runs; rlscale.runfolder.truncation)", "Sec. 3.2", ge=0, le=1)


@dataclass
class DownstreamSet:
    """An eval set beside the run's own held-out split: another task's held-out prompts, scored by that task; its
    task config is typed by its ``task.name`` as the run's ``task`` is."""

    name: str = knob("set", "the set's name, in its metrics: ``val_reward/<name>``")
    samples: int = knob(1, "samples per prompt of this set in an eval", ge=1)
    task: Any = option_default(TASK, "reasoning_gym", "Sec. 5")


@dataclass
class EvalConfig:
    """Downstream eval sets: at every eval of the run (``trainer.eval_every``), each set's held-out prompts are
    sampled with the run's generator and scored by the set's task, and logged as ``val_reward/<name>`` (and
    ``val_reward_se/<name>``, ...) in the eval line, beside the in-distribution ``val_reward`` (Sec. 2's
    held-out eval; the paper also tracks downstream benchmarks such as AIME-24, Sec. 5)."""

    downstream: List[DownstreamSet] = knob([], "the sets (conf/eval/code.yaml, conf/eval/gsm8k.yaml); only each "
                                           "set's held-out split is used")


@dataclass
class RunConfig:
    """One run: the ScaleRL recipe by default (conf/config.yaml); conf/baseline.yaml is Section 2's."""

    model: Any = option_default(MODEL, "tiny", "")
    task: Any = option_default(TASK, "reasoning_gym", "Sec. 2")
    mixture: MixtureConfig = field(default_factory=MixtureConfig)
    loss: Any = option_default(LOSS, "cispo")
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    normalization: Any = option_default(NORMALIZATION, "batch")
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    filtering: FilteringConfig = field(default_factory=FilteringConfig)
    curriculum: Any = option_default(CURRICULUM, "no_positive_resampling")
    length: Any = option_default(LENGTH, "interruption")
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    offpolicy: Any = option_default(OFFPOLICY, "pipeline", "Sec. 3.1")
    batch: BatchConfig = field(default_factory=BatchConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    launcher: Any = option_default(LAUNCHER, "local", "")
    logger: Any = option_default(LOGGER, "none", "")
    seed: int = knob(0, "seed of the run: torch's, the RL pool's order and the generators' sampling", ge=0, le=MAX_SEED)
    sweep: str = knob("default", "the sweep the run belongs to (its results folder)")
    variant: str = knob("run", "the run's name within its sweep; ``rlscale run`` without ``out`` or ``variant`` names it "
                        "after its overrides (``batch.prompts-8_loss-dapo``)")
    out: str = knob("results/${sweep}/${variant}", "the run folder; a sweep writes ``<sweep>/<run>`` relative to its "
                    "results root")
    cache_dir: str = knob("~/.cache/rlscale",
                          "where warmed-up tiny models, compile caches and de-quantized GGUF copies are kept")
    unread: Dict[str, Dict[str, Any]] = knob({}, "section -> knob -> value: what a config.yaml of one flat section "
                                             "per axis held, off its default, for an option that never read it "
                                             "(``offpolicy.batches_per_version: 8`` beside offpolicy=pipeline; a "
                                             "mixture part's or downstream set's task under its dotted name, "
                                             "``mixture.parts[0].task``), "
                                             "filled in as such a file is read and kept only for the run's "
                                             "identity (``FLAT_DEFAULTS``); empty in a config composed now")


FLAT_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "loss": {"eps_low": 0.2, "eps_high": 0.28, "cispo_cap": 4.0},
    "length": {"window": [20, 24], "l_max": 32, "l_cache": 5},
    "curriculum": {"threshold": 0.9, "window": 1},
    "launcher": {"max_parallel": 0, "partition": None, "account": None, "qos": None, "cpus_per_task": 1,
                 "mem_gb": 4.0, "array_parallelism": 16, "extra_sbatch": {}},
    "logger": {"dir": None, "project": "rlscale", "mode": "offline"},
    "normalization": {"eps": 1.0e-6},
    "model": {"path": None, "gguf_file": None, "hidden_size": 128, "num_layers": 2, "num_heads": 4,
              "intermediate_size": 256, "max_position_embeddings": 256, "warmup_steps": 300, "warmup_lr": 3.0e-3,
              "warmup_batch": 64, "warmup_correct_fraction": 0.2},
    "offpolicy": {"batches_per_version": 2, "max_lag": 2, "num_generators": 1, "queue_size": 4,
                  "update_every_tokens": 16},
    "task": {"dataset": "chain_sum", "dataset_kwargs": {}, "path": None, "val_path": None, "prompt_style": "expression",
             "prompt_key": "prompt", "answer_key": "answer"}}
"""The knobs that config.yaml files of one flat section per axis wrote for every option, at the defaults they had
there. A written file's knob that its option does not have is one of these, never read by that option: it is dropped
from its section when the file is read (``rlscale.config.compose``), and kept in ``RunConfig.unread`` when it is off
this default (a sweep's shared ``offpolicy.batches_per_version=8`` beside offpolicy=pipeline); wherever configs are
compared or hashed, a section lacking one reads it from ``unread``, else at this default
(``without_default_sections``), so those run folders keep their identity and resume. ``task`` holds for the task of
every mixture part and downstream set too (``task_sections``)."""

FLAT_UNREAD = ("normalization", "offpolicy", "model", "task", "launcher", "logger")
"""The sections of ``FLAT_DEFAULTS`` whose knobs no other option ever read, at any value: a written file's knob that
its option lacks is kept in ``RunConfig.unread`` when it is off its default, not refused. (An older cispo read
``loss.eps_high`` as its cap, so a loss section's off-default knob of another loss is refused.)"""

ABSENT_AS_DEFAULT = ("mixture", "eval", "launcher.generator_tasks", "engine.activation_checkpointing",
                     "engine.generator_rows", "logger.completions_rows")
"""Sections and fields that config.yaml files written before them lack. Such a file reads them as their defaults (the
schema fills them in), and wherever configs are compared or hashed one at its default is left out
(``without_default_sections``), so those run folders keep their identity and resume."""


NESTED_TASKS = (("mixture", "parts"), ("eval", "downstream"))
"""The lists whose entries hold a task config of their own (``MixturePart.task``, ``DownstreamSet.task``), typed by
its ``name`` as the run's ``task`` is."""


def task_sections(fields: Dict[str, Any]) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(where, key, entry) of each mixture part and downstream set of ``fields`` (a whole config as nested dicts)
    whose task is a mapping: ``where`` names its task as problems do (``mixture.parts[0].task``), ``key`` as an
    override does (``mixture.parts.0.task``); ``entry["task"]`` is the task."""
    for section, leaf in NESTED_TASKS:
        entries = (fields.get(section) or {}).get(leaf) if isinstance(fields.get(section), dict) else None
        for i, entry in enumerate(entries or ()):
            if isinstance(entry, dict) and isinstance(entry.get("task"), dict):
                yield f"{section}.{leaf}[{i}].task", f"{section}.{leaf}.{i}.task", entry


def without_default_sections(fields: Dict[str, Any]) -> Dict[str, Any]:
    """``fields`` (a whole config as nested dicts) less each ``ABSENT_AS_DEFAULT`` section or field that equals its
    default; each section typed by its option reads the ``FLAT_DEFAULTS`` knobs it lacks at their defaults, or at the
    value ``unread`` kept for it (which itself is left out)."""
    defaults = asdict(RunConfig())
    kept = dict(fields)
    unread = kept.pop("unread", None) or {}
    for axis in TYPED_BY_OPTION:
        if isinstance(kept.get(axis.section), dict):
            kept[axis.section] = {**FLAT_DEFAULTS[axis.section], **unread.get(axis.section, {}), **kept[axis.section]}
    for section, _ in NESTED_TASKS:  # copied before their entries' tasks are completed below
        if isinstance(kept.get(section), dict):
            kept[section] = copy.deepcopy(kept[section])
    for where, _, entry in task_sections(kept):
        entry["task"] = {**FLAT_DEFAULTS["task"], **unread.get(where, {}), **entry["task"]}
    for dotted in ABSENT_AS_DEFAULT:
        section, _, leaf = dotted.rpartition(".")
        into, default = (kept, defaults) if not section else (dict(kept.get(section, {})), defaults[section])
        if leaf in into and into[leaf] == default[leaf]:
            del into[leaf]
        if section and section in kept:
            kept[section] = into
    return kept
