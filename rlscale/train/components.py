"""Build everything one run needs from its config: task, tokenizer, policy, generator, learner,
curriculum pool, rollout source, compute meter. The loop only sees these interfaces, so the
generator (torch | vllm), the learner (torch | deepspeed), the off-policy mode (ppo | pipeline) and the
rest are swapped here without touching it: each is the factory that ``rlscale.config.registry`` names for the
configured choice, imported only when chosen."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, List, Optional

import torch

from rlscale.config.registry import (AGGREGATION, CURRICULUM, DEVICE, LENGTH, LOSS, MODEL, NORMALIZATION, OFFPOLICY,
                                     TASK)
from rlscale.config.schema import RunConfig
from rlscale.core.protocols import FollowerLearner, Generator, Learner, PolicyTokenizer
from rlscale.engines.compile_cost import STALLS, use_persistent_cache
from rlscale.engines.generators.build import GeneratorSettings, build_generator
from rlscale.engines.learners.build import LearnerSettings, build_learner
from rlscale.engines.memory import JobLayout, ModelShape, check_trainer_fits, checkpointing_needed, generator_rows
from rlscale.engines.models.configs import PolicyInputs
from rlscale.engines.models.policy import count_parameters
from rlscale.engines.models.thinking import resolve_think
from rlscale.gpus import driver_gpu_count
from rlscale.rl import NoPositiveResamplingPool
from rlscale.rl.advantages import Normalization, NormalizationConfig
from rlscale.rl.aggregation import Denominator
from rlscale.tasks.answer_format import AnswerFormat, FormattedTask
from rlscale.tasks.base import Task, TaskConfig
from rlscale.tasks.mixture import MixtureTask, Part
from rlscale.tracking.sinks import TrackedRun
from rlscale.train.compute import ComputeMeter
from rlscale.train.evaluate import DownstreamEval
from rlscale.train.offpolicy.source import SourceInputs
from rlscale.train.rollouts import RolloutSampler, RolloutSource


@dataclass(frozen=True)
class Objective:
    """The choices of the RL objective that the loop applies to a batch (Sec. 3.2), resolved once from their names:
    zero-variance filtering, the advantage normalization (with its section) and the loss aggregation's denominator."""

    zero_variance: bool
    normalize: Normalization
    normalization: NormalizationConfig
    denominator_of: Denominator

    @classmethod
    def of(cls, cfg: RunConfig) -> "Objective":
        return cls(cfg.filtering.zero_variance, NORMALIZATION.load(cfg.normalization.name), cfg.normalization,
                   AGGREGATION.load(cfg.aggregation.name))


@dataclass
class Components:
    cfg: RunConfig
    device: torch.device
    task: FormattedTask | MixtureTask
    tok: PolicyTokenizer
    model: Any
    generator: Generator
    learner: Learner
    pool: NoPositiveResamplingPool
    rng: torch.Generator
    meter: ComputeMeter
    sampler: RolloutSampler
    source: RolloutSource
    downstream: List[DownstreamEval]
    objective: Objective


def cuda_device() -> torch.device:
    """``engine.device=cuda``: under a multi-process launch each rank takes the GPU of its LOCAL_RANK."""
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def cpu_device() -> torch.device:
    """``engine.device=cpu``."""
    return torch.device("cpu")


def auto_device() -> torch.device:
    """``engine.device=auto``: CUDA when available, else CPU, but never CPU while the machine has GPUs that this
    process cannot see (hidden by ``CUDA_VISIBLE_DEVICES`` or a CPU build of torch)."""
    if torch.cuda.is_available():
        return cuda_device()
    hidden = driver_gpu_count()
    if hidden:
        raise RuntimeError(f"engine.device=auto: this machine has {hidden} GPU(s) but this process "
                           f"sees none (CUDA_VISIBLE_DEVICES='{os.environ.get('CUDA_VISIBLE_DEVICES', '')}', "
                           f"torch {torch.__version__}); set engine.device=cpu to train on the CPU")
    return cpu_device()


def pick_device(name: str) -> torch.device:
    """The device ``engine.device`` names (``rlscale.config.registry.DEVICE``)."""
    return DEVICE.load(name)()


def prepare_process(cfg: RunConfig) -> torch.device:
    """Threads, seed and device of this process (every rank of a launch does the same); on CUDA, the
    persistent compile cache under ``cache_dir`` and the clock of compilation stalls."""
    if cfg.engine.threads > 0:
        torch.set_num_threads(cfg.engine.threads)
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.engine.device)
    if device.type == "cuda":
        use_persistent_cache(cfg.cache_dir)
        STALLS.hook_compiler()
    return device


def build_task(cfg: RunConfig) -> FormattedTask | MixtureTask:
    """The task ``task.name`` builds, or for ``task.name=mixture`` the mixture of ``mixture.parts``."""
    if cfg.task.name == "mixture":
        return MixtureTask([Part(p.name, p.weight, formatted_task(p.task)) for p in cfg.mixture.parts])
    return formatted_task(cfg.task)


def formatted_task(task_cfg: TaskConfig) -> FormattedTask:
    """The task ``task_cfg.name`` builds (its module imported now; a plug-in's included), its prompts and
    verification in ``task_cfg.answer_format``."""
    return FormattedTask(TASK.load(task_cfg.name)(task_cfg), AnswerFormat(task_cfg.answer_format))


def build_policy(cfg: RunConfig, task: Task, device: torch.device):
    """(model, tokenizer) of ``model.name``: the cached warmed-up tiny Llama or a local HF checkpoint; the
    tokenizer renders prompts with ``generation.think`` resolved for that model."""
    inputs = PolicyInputs(task, cfg.task, tuple(cfg.mixture.parts), cfg.length.phrase, Path(cfg.cache_dir))
    model, tok = MODEL.load(cfg.model.name)(cfg.model, inputs)
    tok = replace(tok, think=resolve_think(cfg.generation.think, tok.think, cfg.length.name))
    return model.to(device).eval(), tok


def longest_prompt(task: Task, tok) -> int:
    """Tokens of the run's longest training prompt."""
    return max(len(tok.encode_prompt(p.prompt)) for p in task.train_problems())


def longest_sequence(task: Task, tok, generator) -> int:
    """Tokens of the run's longest training sequence: its longest prompt plus the longest completion the
    generator samples (0 when the generator does not say), so a compiled learner pads every batch to one
    shape (``rlscale.engines.learners.torch_learner``)."""
    longest_completion = getattr(generator, "max_new_tokens", 0)
    if not longest_completion:
        return 0
    return longest_prompt(task, tok) + longest_completion


def generator_settings(cfg: RunConfig, rows: Optional[int] = None) -> GeneratorSettings:
    """The generator's own settings, made from the run's config once (a PipelineRL generator process is built from
    them alone). ``rows``: ``engine.generator_rows`` resolved (``resolved_generator_rows``); None: as configured,
    ``auto`` as 0."""
    configured = cfg.engine.generator_rows
    rows = (0 if configured == "auto" else configured) if rows is None else rows
    return GeneratorSettings(cfg.engine.generator, cfg.generation, cfg.length, cfg.precision.lm_head_fp32,
                             cfg.engine.compile, cfg.seed, rows)


def learner_settings_of(cfg: RunConfig, compiled: bool = False, max_width: int = 0,
                        checkpointing: Optional[bool] = None) -> LearnerSettings:
    """The learner's own settings, with the loss ``loss.name`` names resolved once. ``checkpointing``:
    ``engine.activation_checkpointing`` resolved (``auto_checkpointing``); None: as configured, ``auto`` as off (as
    on CPU)."""
    resolved = cfg.engine.activation_checkpointing is True if checkpointing is None else checkpointing
    return LearnerSettings(cfg.engine.learner, cfg.optim, cfg.loss, LOSS.load(cfg.loss.name),
                           cfg.precision.lm_head_fp32, cfg.generation.temperature, cfg.batch.micro_batch,
                           cfg.engine.zero_stage, cfg.model.dtype, compiled, max_width, resolved)


def auto_checkpointing(cfg: RunConfig, model, prompt_tokens: int, device: torch.device) -> bool:
    """``engine.activation_checkpointing`` resolved for this run's job on ``device`` (``checkpointing_needed``): with
    ``auto``, on when the memory estimate of the trainer GPU for ``model``'s shape and prompts of
    ``prompt_tokens`` (the run's longest) does not fit the card without it; every rank of a job resolves it
    alike (the estimate is rank 0's)."""
    setting = cfg.engine.activation_checkpointing
    if setting != "auto" or device.type != "cuda":  # as set; auto is off on CPU
        return setting is True
    return checkpointing_needed(ModelShape.of_config(model.config), JobLayout.of(cfg, prompt_tokens),
                                torch.cuda.get_device_properties(device).total_memory)


def learner_settings(cfg: RunConfig, task: Task, tok, model, device: torch.device, compiled: bool = False,
                     width: int = 0) -> LearnerSettings:
    """The learner's settings with ``engine.activation_checkpointing`` resolved for the run's longest prompt on
    ``device`` (``auto_checkpointing``; on CPU no prompt is read)."""
    prompt = longest_prompt(task, tok) if device.type == "cuda" else 0
    return learner_settings_of(cfg, compiled, width, auto_checkpointing(cfg, model, prompt, device))


def resolved_generator_rows(cfg: RunConfig, task: Task, tok, model, device: torch.device) -> int:
    """``engine.generator_rows`` resolved for the run's longest prompt on ``device``
    (``rlscale.engines.memory.generator_rows``: the card of ``device``, ``model``'s shape, activation
    checkpointing as the learners resolve it); a setting that does not fit, or a trainer GPU that does not
    (``rlscale.engines.memory.check_trainer_fits``), stops the run here, before it samples, with a ValueError in one
    line naming the field. As configured (``auto`` as 0) off CUDA and for
    generators other than torch, which do not read it."""
    configured = cfg.engine.generator_rows
    if device.type != "cuda" or cfg.engine.generator != "torch":
        return 0 if configured == "auto" else configured
    shape, job = ModelShape.of_config(model.config), JobLayout.of(cfg, longest_prompt(task, tok))
    card = torch.cuda.get_device_properties(device).total_memory
    if cfg.engine.activation_checkpointing == "auto":
        job = replace(job, checkpointing=checkpointing_needed(shape, job, card))
    rows = generator_rows(shape, job, card)
    check_trainer_fits(shape, replace(job, generator_rows=rows), card)
    return rows


def build_pool(cfg: RunConfig, split: int) -> NoPositiveResamplingPool:
    """The pool of ``curriculum.name`` over the first ``curriculum.pool_size`` of ``split`` training prompts."""
    return CURRICULUM.load(cfg.curriculum.name)(min(cfg.curriculum.pool_size, split) or split, cfg.curriculum)


def build_source(cfg: RunConfig, sampler: RolloutSampler, model, run_dir: Path) -> RolloutSource:
    """The rollout source of ``offpolicy.name`` (Sec. 3.1), handed its own section and the run's parts it uses."""
    inputs = SourceInputs(sampler, model, Path(run_dir), generator_settings(cfg), cfg.batch,
                          cfg.launcher.generator_tasks)
    return OFFPOLICY.load(cfg.offpolicy.name)(cfg.offpolicy, inputs)


def tracked_run(cfg: RunConfig, run_dir: Path) -> TrackedRun:
    """The run an experiment tracker follows (``logger=``): its name, folder and config as plain data."""
    return TrackedRun(f"{cfg.sweep}/{cfg.variant}", Path(run_dir), asdict(cfg))


def build_components(cfg: RunConfig, run_dir: Path) -> Components:
    device = prepare_process(cfg)
    task = build_task(cfg)
    model, tok = build_policy(cfg, task, device)
    return assemble_components(cfg, task, model, tok, device, run_dir)


def assemble_components(cfg: RunConfig, task: Task, model, tok, device: torch.device, run_dir: Path) -> Components:
    """The run's parts around its task and policy (``build_components`` builds those from the config; the GPU
    benchmarks hand in a synthetic task and a random-weight model): generator rows and activation checkpointing
    resolved on ``device``, the learner compiled for the longest sequence, the pool, sampler and rollout source."""
    rows = resolved_generator_rows(cfg, task, tok, model, device)
    generator = build_generator(generator_settings(cfg, rows), model, tok, device)
    compiled = cfg.engine.compile and device.type == "cuda"
    width = longest_sequence(task, tok, generator) if compiled else 0
    learner = build_learner(learner_settings(cfg, task, tok, model, device, compiled, width), model)
    pool = build_pool(cfg, len(task.train_problems()))
    rng = torch.Generator().manual_seed(cfg.seed)
    meter = ComputeMeter(count_parameters(model), device.type,
                         torch.cuda.device_count() if device.type == "cuda" else 1)
    sampler = RolloutSampler(task, tok, generator, pool, cfg.batch.generations, cfg.filtering, cfg.length,
                             LENGTH.load(cfg.length.name), rng, meter)
    source = build_source(replace(cfg, engine=replace(cfg.engine, generator_rows=rows)), sampler, model, run_dir)
    downstream = [DownstreamEval(entry.name, entry.samples, formatted_task(entry.task))
                  for entry in cfg.eval.downstream]
    return Components(cfg, device, task, tok, model, generator, learner, pool, rng, meter, sampler, source,
                      downstream, Objective.of(cfg))


def serve_generator_task(cfg: RunConfig, run_dir: Path, index: int) -> int:
    """Generator task ``index`` of the run's job (``launcher.generator_tasks``): the run's policy and generator on
    this task's device (its local rank's GPU on CUDA), serving rank 0's chunks until the run is over
    (rlscale.train.offpolicy.pipeline_remote); returns the chunks served."""
    from rlscale.train.offpolicy.pipeline_remote import serve_generator_task as serve
    from rlscale.train.offpolicy.pipeline_workers import GeneratorSpec

    device = prepare_process(cfg)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    task = build_task(cfg)
    model, tok = build_policy(cfg, task, device)
    settings = generator_settings(cfg, resolved_generator_rows(cfg, task, tok, model, device))
    spec = GeneratorSpec(settings, cfg.offpolicy.update_every_tokens, tok, cfg.batch.generations, cfg.engine.threads)
    return serve(spec, lambda replica: build_generator(settings, replica, tok, device), model, index,
                 cfg.launcher.generator_tasks, Path(run_dir) / f"generator-task-{index}.log")


def follower_rank() -> bool:
    """True on ranks > 0 of a multi-process launch (torchrun and the deepspeed launcher set RANK)."""
    return int(os.environ.get("RANK", "0")) > 0


def build_follower_learner(cfg: RunConfig) -> FollowerLearner:
    """Ranks > 0 of a DeepSpeed launch: the same policy and learner as rank 0, without the generator,
    curriculum or rollout source, which live on rank 0 alone."""
    if cfg.engine.learner != "deepspeed":
        raise ValueError(f"engine.learner={cfg.engine.learner}: only the deepspeed learner runs on several ranks")
    device = prepare_process(cfg)
    task = build_task(cfg)
    model, tok = build_policy(cfg, task, device)
    return build_learner(learner_settings(cfg, task, tok, model, device), model)
