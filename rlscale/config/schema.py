"""Typed schema of one run's configuration.

Hydra composes ``rlscale/conf/config.yaml`` (the ScaleRL recipe) from one config group per design axis; the
composed tree is merged into these dataclasses, so an unknown key or a value of the wrong type fails
with the dotted name of the field at fault. Range checks that types cannot express live in
``rlscale.config.validate``. Section numbers refer to "The Art of Scaling Reinforcement Learning
Compute for LLMs" (arXiv 2510.13786).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass
class ModelConfig:
    """The policy. ``tiny``: a small Llama built from these sizes, warmed up by a short deterministic
    supervised phase and cached by content hash (so every variant of a sweep starts from the same
    weights). ``hf``: a local Hugging Face checkpoint directory (``path``; ``gguf_file`` for GGUF)."""

    name: str = "tiny"
    path: Optional[str] = None
    gguf_file: Optional[str] = None
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 256
    warmup_steps: int = 300
    warmup_lr: float = 3.0e-3
    warmup_batch: int = 64
    warmup_correct_fraction: float = 0.2
    dtype: str = "float32"


@dataclass
class TaskConfig:
    """Prompts with reference answers and a verifier. ``reasoning_gym``: any reasoning-gym task by name
    (``dataset``); ``math``: local jsonl/parquet problems scored with Math-Verify (Section 2).
    ``prompt_style``: ``question`` (the dataset's text) or ``expression`` (the entry's arithmetic
    expression followed by " =", a compact prompt for the char-level tiny model).
    ``answer_format`` (``rlscale.tasks.answer_format``): ``exact`` (the answer text as a whole, checked by
    the task's verifier), ``tagged`` (the prompt asks for reasoning-gym's ``<answer>...</answer>``, the
    last such tag is checked), ``math_verify`` (Math-Verify of the answer text against the reference, so
    "The answer is 9." or ``\\boxed{9}`` scores as 9)."""

    name: str = "reasoning_gym"
    dataset: str = "chain_sum"
    dataset_kwargs: dict = field(default_factory=dict)
    train_size: int = 2000
    val_size: int = 200
    path: Optional[str] = None
    val_path: Optional[str] = None
    prompt_style: str = "question"
    prompt_key: str = "prompt"
    answer_key: str = "answer"
    answer_format: str = "exact"
    seed: int = 1234


@dataclass
class LossConfig:
    """Policy loss (Section 3.2). rho = pi_train / pi_generator_old per token (GSPO: per sequence).
    grpo: clip [1-0.2, 1+0.2]; dapo: asymmetric [1-0.2, 1+0.28]; gspo: sequence ratio clipped at
    [1-eps_low, 1+eps_high] with eps ~4e-3; cispo: sg(min(rho, eps_high)) * A * log pi, eps_max 4.
    ``tis_cap``: truncated importance-sampling weight min(pi_train_old/pi_gen, cap) (None = off).
    ``kl_coef``: optional k3 KL to the initial policy (the paper uses none)."""

    name: str = "cispo"
    eps_low: float = 0.0
    eps_high: float = 4.0
    tis_cap: Optional[float] = None
    kl_coef: float = 0.0


@dataclass
class AggregationConfig:
    """Loss aggregation (Section 3.2): prompt (ScaleRL), sample, or token average."""

    name: str = "prompt"


@dataclass
class NormalizationConfig:
    """Advantage normalization (Section 3.2): batch (ScaleRL), group (prompt-level std), none."""

    name: str = "batch"
    eps: float = 1.0e-6


@dataclass
class PrecisionConfig:
    """FP32 LM head on generator and trainer (ScaleRL, Section 3.2) or bf16 head."""

    name: str = "fp32_head"
    lm_head_fp32: bool = True


@dataclass
class FilteringConfig:
    """Zero-variance filtering (drop prompts whose rewards are all equal from the loss, Section 3.2) and
    DAPO dynamic sampling (resample to refill the batch; ``max_rounds`` extra generation rounds)."""

    name: str = "zero_variance"
    zero_variance: bool = True
    dynamic_sampling: bool = False
    max_rounds: int = 3


@dataclass
class CurriculumConfig:
    """No-Positive-Resampling (Section 3.2): prompts whose historical pass rate reaches ``threshold``
    leave the pool for good. ``uniform``: the baseline's uniform resampling. ``pool_size``: the RL pool is
    the first ``pool_size`` training prompts (0, or more than the split holds: the whole split); the policy's warm-up still
    sees the whole split. A pool that the run goes through several times lets the curriculum act: a
    prompt removed in epoch e is absent from epoch e + 1 on (the paper's runs cross several epochs)."""

    name: str = "no_positive_resampling"
    threshold: float = 0.9
    pool_size: int = 0


@dataclass
class LengthConfig:
    """Length control (Section 3.2). interruption: at a random think length in ``window`` the phrase
    is appended and the answer generated (paper: [10k, 12k] of a 12,288-token think budget; here [20, 24]
    of 24); penalty: DAPO overlong penalty on correct traces, clip((l_max - |y|) / l_cache - 1, -1, 0),
    zero up to l_max - l_cache tokens. The paper's l_max 14k and l_cache 2k start the penalty at 12k, 84 %
    of its 14,336-token budget (think + answer); here l_max 32 (the 24 + 8 budget) and l_cache 5 start it
    at 27 tokens, 84 %. Checked: 0 < l_cache <= l_max <= max_think_tokens + max_answer_tokens."""

    name: str = "interruption"
    window: List[int] = field(default_factory=lambda: [20, 24])
    phrase: str = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"
    l_max: int = 32
    l_cache: int = 5


@dataclass
class GenerationConfig:
    """Sampling: think budget and answer budget in tokens (paper: 12,288 + 2,048), temperature.
    ``think``: true | false | auto. With thinking on the assistant turn opens a ``<think>`` trace and the
    answer is the text after ``</think>``; with it off the prompt is rendered with thinking disabled, the
    whole completion is the answer and is truncated at ``max_answer_tokens``. auto: on for the embedded
    model and for chat templates that know thinking (``enable_thinking`` or ``<think>``), else off
    (``rlscale.engines.models.thinking``)."""

    think: Any = "auto"
    max_think_tokens: int = 24
    max_answer_tokens: int = 8
    temperature: float = 1.0


@dataclass
class OffpolicyConfig:
    """Off-policy algorithm (Section 3.1): ``pipeline`` (PipelineRL-k, ScaleRL) or ``ppo``
    (PPO-off-policy-k: generate k batches, then k updates). k = 0 is on-policy.

    ``update_every_tokens`` (pipeline only): 0 = a generator takes new weights at its next decode step
    after they are published, as in the paper ("as soon as an update finishes"), so which version samples
    which token depends on timing; N > 0 = scheduled in-flight updates: a chunk issued at version v samples
    its decode step s with version v + s // N (waiting for it), capped at the version of the step that
    consumes the chunk. The same seed then gives the same curve, a resumed run included; the trainer keeps
    k + 1 published copies of the policy, and checkpoints hold up to k older ones."""

    name: str = "pipeline"
    k: int = 8
    num_generators: int = 1
    queue_size: int = 4
    update_every_tokens: int = 0


@dataclass
class BatchConfig:
    """Prompts per update and generations per prompt (paper: 48 x 16). ``micro_batch``: sequences
    per forward/backward in gradient accumulation (0 = whole batch)."""

    prompts: int = 16
    generations: int = 8
    micro_batch: int = 0


@dataclass
class OptimConfig:
    """AdamW, constant lr after linear warm-up (paper: 5e-7, eps 1e-15, wd 0.01, 100 warm-up steps;
    scaled for the tiny model)."""

    lr: float = 1.0e-4
    betas: List[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1.0e-15
    weight_decay: float = 0.01
    warmup_steps: int = 5
    grad_clip: float = 1.0


@dataclass
class EngineConfig:
    """Backends: generator ``torch`` | ``vllm``; learner ``torch`` | ``deepspeed`` (ZeRO ``zero_stage``).
    ``device``: auto | cpu | cuda; ``threads``: torch intra-op threads of the run (0 = leave
    as is); PipelineRL on CPU shares them equally between the trainer and its generator processes.
    ``compile``: on CUDA, torch.compile the torch learner's forward and backward and the torch
    generator's per-layer decode work (element-wise chains fused around the GEMMs); no effect on CPU."""

    generator: str = "torch"
    learner: str = "torch"
    zero_stage: int = 2
    device: str = "auto"
    threads: int = 0
    compile: bool = True


@dataclass
class TrainerConfig:
    """Loop length and cadence. Eval: mean pass rate on the held-out split, ``eval_samples`` samples
    per prompt (paper: 16), at step 0 and every ``eval_every`` steps. Rewards +1/-1 (Section 2).
    ``eval_samples_logged``: completions of each eval written to the run's samples.jsonl (0 = none)."""

    max_steps: int = 60
    eval_every: int = 6
    eval_samples: int = 1
    eval_samples_logged: int = 4
    checkpoint_every: int = 10
    truncation_warn: float = 0.10


@dataclass
class LauncherConfig:
    """Where sweep variants run: ``local`` (submitit local executor) or ``slurm`` (submitit job arrays,
    or the generated sbatch scripts)."""

    name: str = "local"
    max_parallel: int = 0
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    gpus_per_node: int = 0
    cpus_per_task: int = 1
    mem_gb: float = 4.0
    timeout_min: int = 60
    array_parallelism: int = 16
    signal_delay_s: int = 60
    extra_sbatch: dict = field(default_factory=dict)
    setup: List[str] = field(default_factory=list)


@dataclass
class LoggerConfig:
    """Experiment tracking: every metrics.jsonl line is mirrored to ``none`` | ``tensorboard`` | ``wandb``
    | ``mlflow`` (rlscale.tracking). ``dir``: TensorBoard's log folder or MLflow's tracking URI (default:
    ``tensorboard/`` or ``mlruns/`` in the run folder); ``project``: the W&B project or MLflow experiment;
    ``mode``: W&B's mode, ``offline`` unless set to ``online``."""

    name: str = "none"
    dir: Optional[str] = None
    project: str = "rlscale"
    mode: str = "offline"


@dataclass
class RunConfig:
    """One run: the ScaleRL recipe by default (rlscale/conf/config.yaml); rlscale/conf/baseline.yaml is Section 2's."""

    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    filtering: FilteringConfig = field(default_factory=FilteringConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    length: LengthConfig = field(default_factory=LengthConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    offpolicy: OffpolicyConfig = field(default_factory=OffpolicyConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    seed: int = 0
    sweep: str = "default"
    variant: str = "run"
    out: str = "results/${sweep}/${variant}"  # a sweep writes <sweep>/<run>, relative to its results root
    cache_dir: str = "~/.cache/rlscale"
