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

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from rlscale.config.axis import Axis
from rlscale.config.registry import CURRICULUM, LENGTH, LOSS, OFFPOLICY, TYPED_BY_OPTION
from rlscale.knobs import knob

MAX_SEED = 2 ** 63 - 1  # torch.manual_seed takes a signed 64-bit integer


def option_default(axis: Axis, name: str, paper: str = "Sec. 3.2") -> Any:
    """A section typed by its option (``rlscale.config.registry.TYPED_BY_OPTION``), by default the config of
    ``name``, built from its class's defaults."""
    return field(default_factory=lambda: axis.config_class(name)(),
                 metadata={"doc": f"the option's own config class ({axis.field} names it; default {name})",
                           "paper": paper, "axis": axis.field})


@dataclass
class ModelConfig:
    """The policy: the embedded tiny Llama or a local Hugging Face checkpoint."""

    name: str = knob("tiny", "``tiny``: a small Llama built from the sizes below, warmed up by a short deterministic "
                     "supervised phase and cached by content hash, so every variant of a sweep starts from the same "
                     "weights; ``hf``: a local Hugging Face checkpoint (``path``)")
    path: Optional[str] = knob(None, "hf: the checkpoint directory (or the name of a packaged GGUF model)")
    gguf_file: Optional[str] = knob(None, "hf: the GGUF file inside ``path``, de-quantized on load")
    hidden_size: int = knob(128, "tiny: hidden size", gt=0)
    num_layers: int = knob(2, "tiny: decoder layers", gt=0)
    num_heads: int = knob(4, "tiny: attention heads", gt=0)
    intermediate_size: int = knob(256, "tiny: MLP width", gt=0)
    max_position_embeddings: int = knob(256, "tiny: longest sequence", gt=0)
    warmup_steps: int = knob(300, "tiny: steps of the supervised warm-up", ge=0)
    warmup_lr: float = knob(3.0e-3, "tiny: learning rate of the warm-up", gt=0)
    warmup_batch: int = knob(64, "tiny: sequences per warm-up step", gt=0)
    warmup_correct_fraction: float = knob(0.2, "tiny: fraction of warm-up demonstrations with the correct answer, so "
                                          "the warmed-up policy is right some of the time (R0 low, not zero)",
                                          ge=0, le=1)
    dtype: str = knob("float32", "parameter dtype (float32, bfloat16, float16); bf16 weights train with FP32 master "
                      "weights", one_of=("float32", "bfloat16", "float16"))


@dataclass
class TaskConfig:
    """Prompts with reference answers and a verifier; rewards are +1 / -1 (Sec. 2). The task class ``name`` selects
    checks its own fields as the config is composed (its ``config_problems``), before any compute."""

    name: str = knob("reasoning_gym", "``reasoning_gym``: any reasoning-gym task by name (``dataset``); ``math``: "
                     "local jsonl/parquet problems scored with Math-Verify; ``code``: small Python functions run "
                     "on hidden tests in a sandbox", "Sec. 2")
    dataset: str = knob("chain_sum", "reasoning_gym: the task's name, any task reasoning-gym registers (``chain_sum``, "
                        "``basic_arithmetic``, ``gsm_symbolic``, ``products``, ...); another name is refused as the "
                        "config is composed, the closest one suggested")
    dataset_kwargs: dict = knob({}, "reasoning_gym: arguments of the task's generator, over its defaults (chain_sum's "
                                "here: 2-4 one-digit terms, a difficulty mix); a key the task's config does not have "
                                "(the closest one named) and values its ``validate()`` refuses are refused as the "
                                "config is composed. On the command line ``+task.dataset_kwargs.KEY=VALUE`` adds one")
    train_size: int = knob(2000, "training prompts (math: at most this many rows)", gt=0)
    val_size: int = knob(400, "held-out validation prompts (reasoning_gym: distinct, none a training prompt); the eval "
                         "is their mean pass rate. Refused as the config is composed when it leaves no training prompt "
                         "among the code task's 2,105 prompts, a math file's rows (without ``val_path``) or the "
                         "distinct prompts of reasoning-gym's chain_sum and products (counted from their arguments); "
                         "other reasoning-gym tasks refuse as the split is drawn when they give fewer", "Sec. 2",
                         gt=0)
    path: Optional[str] = knob(None, "math: the problems file (jsonl or parquet; verl or Polaris columns), or "
                               "``champ``; a missing or unreadable file is refused as the config is composed")
    val_path: Optional[str] = knob(None, "math: a separate validation file (else ``val_size`` rows of ``path`` "
                                   "are held out)")
    prompt_style: str = knob("expression", "reasoning_gym: ``question`` (the dataset's text) or ``expression`` (the "
                             "entry's arithmetic expression followed by \" =\", a compact prompt for the char-level "
                             "tiny model)")
    prompt_key: str = knob("prompt", "math: the prompt column (else ``problem``); a file without it is refused as the "
                           "config is composed, from its first row or parquet schema")
    answer_key: str = knob("answer", "math: the reference answer column (else ``reward_model``), checked alike")
    answer_format: str = knob("exact", "how the answer is asked for and checked (``rlscale.tasks.answer_format``)",
                              "Sec. 2")
    seed: int = knob(1234, "seed of the task's problems and of the held-out split", ge=0, le=MAX_SEED)


@dataclass
class MixturePart:
    """One task of a mixture: its name (the suffix of its metrics, ``val_reward/<name>``), its share of the
    training prompts and its own task config."""

    name: str = knob("part", "the part's name, in its metrics: ``reward/<name>``, ``val_reward/<name>``")
    weight: float = knob(1.0, "its share of the RL pool's prompts, relative to the other parts' weights", gt=0)
    task: TaskConfig = field(default_factory=TaskConfig)


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
class NormalizationConfig:
    """Advantage normalization of A_i = r_i - mean(group)."""

    name: str = knob("batch", "the advantage normalization", "Sec. 3.2")
    eps: float = knob(1.0e-6, "added to the std, so a zero-variance group gets advantage 0", ge=0)


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


@dataclass
class OffpolicyConfig:
    """How generation and training interleave. Each mode has its own k: PPO-off-policy-k's k is a batch count,
    PipelineRL-k's a bound on staleness."""

    name: str = knob("pipeline", "the off-policy algorithm", "Sec. 3.1")
    batches_per_version: int = knob(2, "ppo: PPO-off-policy-k's k, the batches generated with one policy version "
                                    "before k updates of one batch each, so a batch is 0..k-1 versions stale (0 or 1: "
                                    "on-policy). Paper: 8 (4 and 8 equal); scaled down for the embedded default's "
                                    "short runs", "Sec. 3.1", ge=0)
    max_lag: int = knob(2, "pipeline: PipelineRL-k's k, the most versions a trained token's sampling policy may lag "
                        "the trainer: generators wait when k + 1 batches ahead (0: on-policy). Paper: 8; scaled "
                        "down for the embedded default's short runs (at 8 a 60-step tiny run dips below R0 first)",
                        "Sec. 3.1", ge=0)
    num_generators: int = knob(1, "pipeline: generator processes beside the trainer (on GPU machines on the GPUs "
                                  "after the trainer's)", gt=0)
    queue_size: int = knob(4, "pipeline: finished chunks waiting for the trainer at most; a full queue stalls the "
                           "generators", gt=0)
    update_every_tokens: int = knob(16, "pipeline: 0 = a generator takes new weights at its next decode step after "
                                    "they are published, the paper's \"as soon as an update finishes\" (which version "
                                    "samples which token then depends on timing); N > 0 = scheduled in-flight updates: "
                                    "a chunk issued at version v samples decode step s with version v + s // N, so one "
                                    "seed gives one curve, a resumed run included. On GPUs pass 0 or about the decode "
                                    "steps a generator makes during one update", "Sec. 3.1", ge=0)


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


@dataclass
class TrainerConfig:
    """Loop length and cadence."""

    max_steps: int = knob(60, "optimizer steps of the run", gt=0)
    eval_every: int = knob(6, "steps between evals of the held-out split (and at step 0) (paper: every 100)", "Sec. 2",
                           gt=0)
    eval_samples: int = knob(1, "samples per held-out prompt in an eval (paper: 16)", "Sec. 2", gt=0)
    eval_samples_logged: int = knob(4, "completions of each eval written to the run's samples.jsonl (0 = none)", ge=0)
    checkpoint_every: int = knob(10, "steps between checkpoints", gt=0)
    truncation_warn: float = knob(0.10, "warn when the truncation rate of a batch exceeds this (the paper saw "
                                  "10-15 % destabilize runs)", "Sec. 3.2", ge=0, le=1)


@dataclass
class DownstreamSet:
    """An eval set beside the run's own held-out split: another task's held-out prompts, scored by that task."""

    name: str = knob("set", "the set's name, in its metrics: ``val_reward/<name>``")
    samples: int = knob(1, "samples per prompt of this set in an eval", ge=1)
    task: TaskConfig = field(default_factory=TaskConfig)


@dataclass
class EvalConfig:
    """Downstream eval sets: at every eval of the run (``trainer.eval_every``), each set's held-out prompts are
    sampled with the run's generator and scored by the set's task, and logged as ``val_reward/<name>`` (and
    ``val_reward_se/<name>``, ...) in the eval line, beside the in-distribution ``val_reward`` (Sec. 2's
    held-out eval; the paper also tracks downstream benchmarks such as AIME-24, Sec. 5)."""

    downstream: List[DownstreamSet] = knob([], "the sets (conf/eval/code.yaml, conf/eval/gsm8k.yaml); only each "
                                           "set's held-out split is used")


@dataclass
class LauncherConfig:
    """Where sweep variants run."""

    name: str = knob("local", "the launcher")
    max_parallel: int = knob(0, "local: runs at once (0 = as many lanes as the machine's GPUs or cores allow)", ge=0)
    partition: Optional[str] = knob(None, "slurm: partition")
    account: Optional[str] = knob(None, "slurm: account")
    qos: Optional[str] = knob(None, "slurm: quality of service")
    gpus_per_node: int = knob(0, "slurm: GPUs per job", ge=0)
    nodes: int = knob(1, "nodes of one run's job (more than 1: launcher=slurm); the run's trainer ranks are "
                      "``nodes`` x ``tasks_per_node`` less ``generator_tasks``, data parallel over DeepSpeed ZeRO",
                      gt=0)
    tasks_per_node: int = knob(1, "tasks per node of one run's job: trainer ranks (more than one in all: "
                               "engine.learner=deepspeed; on CUDA at most ``gpus_per_node``, each task on the GPU of "
                               "its local rank), then the generator tasks; rank 0 generates (unless generator tasks "
                               "do), evaluates and writes the run folder, the other ranks share each update", gt=0)
    generator_tasks: int = knob(0, "the job's last tasks that run PipelineRL's generators instead of trainer ranks, "
                                "one generator each (on CUDA on its task's GPU), on any node, e.g. a second node of 8; "
                                "they take the published weights over the network "
                                "(rlscale.train.offpolicy.pipeline_remote). 0: the generators are "
                                "``offpolicy.num_generators`` processes of rank 0, on its node", "Sec. 3.1", ge=0)
    cpus_per_task: int = knob(1, "slurm: CPUs per job", gt=0)
    mem_gb: float = knob(4.0, "slurm: memory per job in GB", gt=0)
    timeout_min: int = knob(60, "slurm: time limit of a job in minutes", gt=0)
    array_parallelism: int = knob(16, "slurm: jobs of one array running at once", gt=0)
    signal_delay_s: int = knob(60, "slurm: seconds before the time limit at which a job is signalled; its run is "
                               "marked preempted, requeued and resumes from its checkpoint", gt=0)
    extra_sbatch: dict = knob({}, "slurm: further sbatch options, name -> value")
    setup: List[str] = knob([], "shell lines run before each job, as written (module load, source a venv, "
                                "export; $VARS expand)")


@dataclass
class LoggerConfig:
    """Experiment tracking: every metrics.jsonl line mirrored to a tracker (``rlscale.tracking``)."""

    name: str = knob("none", "the tracker")
    dir: Optional[str] = knob(None, "TensorBoard's log folder or MLflow's tracking URI (default: tensorboard/ or "
                              "mlruns/ in the run folder)")
    project: str = knob("rlscale", "the W&B project or MLflow experiment")
    mode: str = knob("offline", "W&B's mode")


@dataclass
class RunConfig:
    """One run: the ScaleRL recipe by default (conf/config.yaml); conf/baseline.yaml is Section 2's."""

    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    mixture: MixtureConfig = field(default_factory=MixtureConfig)
    loss: Any = option_default(LOSS, "cispo")
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    filtering: FilteringConfig = field(default_factory=FilteringConfig)
    curriculum: Any = option_default(CURRICULUM, "no_positive_resampling")
    length: Any = option_default(LENGTH, "interruption")
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    offpolicy: OffpolicyConfig = field(default_factory=OffpolicyConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    seed: int = knob(0, "seed of the run: torch's, the RL pool's order and the generators' sampling", ge=0, le=MAX_SEED)
    sweep: str = knob("default", "the sweep the run belongs to (its results folder)")
    variant: str = knob("run", "the run's name within its sweep; ``rlscale run`` without ``out`` or ``variant`` names it "
                        "after its overrides (``batch.prompts-8_loss-dapo``)")
    out: str = knob("results/${sweep}/${variant}", "the run folder; a sweep writes ``<sweep>/<run>`` relative to its "
                    "results root")
    cache_dir: str = knob("~/.cache/rlscale",
                          "where warmed-up tiny models, compile caches and de-quantized GGUF copies are kept")


FLAT_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "loss": {"eps_low": 0.2, "eps_high": 0.28, "cispo_cap": 4.0},
    "length": {"window": [20, 24], "l_max": 32, "l_cache": 5},
    "curriculum": {"threshold": 0.9, "window": 1}}
"""The knobs that config.yaml files of one flat section per axis wrote for every option, at the defaults they had
there. A written file's knob that its option does not have is one of these, never read by that option: it is dropped
when the file is read (``rlscale.config.compose``); wherever configs are compared or hashed, a section lacking one
reads it at this default (``without_default_sections``), so those run folders keep their identity and resume."""

ABSENT_AS_DEFAULT = ("mixture", "eval", "launcher.generator_tasks", "engine.activation_checkpointing")
"""Sections and fields that config.yaml files written before them lack. Such a file reads them as their defaults (the
schema fills them in), and wherever configs are compared or hashed one at its default is left out
(``without_default_sections``), so those run folders keep their identity and resume."""


def without_default_sections(fields: Dict[str, Any]) -> Dict[str, Any]:
    """``fields`` (a whole config as nested dicts) less each ``ABSENT_AS_DEFAULT`` section or field that equals its
    default; each section typed by its option reads the ``FLAT_DEFAULTS`` knobs it lacks at their defaults."""
    defaults = asdict(RunConfig())
    kept = dict(fields)
    for axis in TYPED_BY_OPTION:
        if isinstance(kept.get(axis.section), dict):
            kept[axis.section] = {**FLAT_DEFAULTS[axis.section], **kept[axis.section]}
    for dotted in ABSENT_AS_DEFAULT:
        section, _, leaf = dotted.rpartition(".")
        into, default = (kept, defaults) if not section else (dict(kept.get(section, {})), defaults[section])
        if leaf in into and into[leaf] == default[leaf]:
            del into[leaf]
        if section and section in kept:
            kept[section] = into
    return kept
