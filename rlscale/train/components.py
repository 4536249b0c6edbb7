"""Build everything one run needs from its config: task, tokenizer, policy, generator, learner,
curriculum pool, rollout source, compute meter. The loop only sees these interfaces, so the
generator (torch | vllm), the learner (torch | deepspeed) and the off-policy mode (ppo | pipeline) are
swapped here without touching it."""
from __future__ import annotations

import copy
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlscale.config.schema import RunConfig
from rlscale.core.protocols import Generator, Learner, PolicyTokenizer
from rlscale.engines.compile_cost import STALLS, use_persistent_cache
from rlscale.engines.generators.build import GeneratorSettings, build_generator
from rlscale.engines.models.policy import count_parameters
from rlscale.engines.models.thinking import resolve_think, template_thinks
from rlscale.gpus import driver_gpu_count
from rlscale.rl import LossSpec, NoPositiveResamplingPool
from rlscale.tasks.answer_format import AnswerFormat, FormattedTask
from rlscale.tasks.base import Task
from rlscale.train.compute import ComputeMeter
from rlscale.train.offpolicy.ppo import PPOOffPolicySource
from rlscale.train.rollouts import RolloutSampler, RolloutSource


@dataclass
class Components:
    cfg: RunConfig
    device: torch.device
    task: FormattedTask
    tok: PolicyTokenizer
    model: Any
    generator: Generator
    learner: Learner
    pool: NoPositiveResamplingPool
    rng: torch.Generator
    meter: ComputeMeter
    sampler: RolloutSampler
    source: RolloutSource


def typed(cfg: DictConfig) -> RunConfig:
    return OmegaConf.to_object(cfg) if isinstance(cfg, DictConfig) else cfg


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU, but never CPU while the machine has GPUs that this process
    cannot see (hidden by ``CUDA_VISIBLE_DEVICES`` or a CPU build of torch). Under a multi-process launch each
    rank takes the GPU of its LOCAL_RANK."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
        hidden = driver_gpu_count() if name == "cpu" else 0
        if hidden:
            raise RuntimeError(f"engine.device=auto: this machine has {hidden} GPU(s) but this process "
                               f"sees none (CUDA_VISIBLE_DEVICES='{os.environ.get('CUDA_VISIBLE_DEVICES', '')}', "
                               f"torch {torch.__version__}); set engine.device=cpu to train on the CPU")
    if name == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device(name)


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


def build_task(cfg: RunConfig) -> FormattedTask:
    """The configured task, its prompts and verification in ``task.answer_format``."""
    from rlscale.tasks.registry import build_task as registry_build

    return FormattedTask(registry_build(cfg.task), AnswerFormat(cfg.task.answer_format))


def build_policy(cfg: RunConfig, task: Task, device: torch.device):
    """(model, tokenizer): the cached warmed-up tiny Llama (warmed up with thinking on), or a local HF
    checkpoint; the tokenizer renders prompts with ``generation.think`` resolved for that model."""
    if cfg.model.name == "tiny":
        from rlscale.engines.models.char_tokenizer import CharTokenizer
        from rlscale.engines.models.tiny_model import load_or_build_tiny

        tok = CharTokenizer(cfg.length.phrase)
        model = load_or_build_tiny(cfg.model, cfg.task, task, tok, Path(cfg.cache_dir))
        model_thinks = True
    else:
        from rlscale.engines.models.hf_model import load_hf_policy_for_training

        model, tok = load_hf_policy_for_training(cfg.model, cfg.length.phrase, Path(cfg.cache_dir))
        model_thinks = template_thinks(tok.tokenizer.chat_template)
    tok = replace(tok, think=resolve_think(cfg.generation.think, model_thinks, cfg.length.name))
    return model.to(device).eval(), tok


def longest_sequence(task: Task, tok, generator) -> int:
    """Tokens of the run's longest training sequence: its longest prompt plus the longest completion the
    generator samples (0 when the generator does not say), so a compiled learner pads every batch to one
    shape (``rlscale.engines.learners.torch_learner``)."""
    longest_completion = getattr(generator, "max_new_tokens", 0)
    if not longest_completion:
        return 0
    return max(len(tok.encode_prompt(p.prompt)) for p in task.train_problems()) + longest_completion


def build_learner(cfg: RunConfig, model, max_width: int = 0):
    spec = LossSpec(**asdict(cfg.loss))
    ref_model = copy.deepcopy(model).eval() if cfg.loss.kl_coef > 0 else None
    if cfg.engine.learner == "deepspeed":
        from rlscale.engines.learners.deepspeed_learner import DeepSpeedLearner

        return DeepSpeedLearner(model, cfg.optim, spec, cfg.precision.lm_head_fp32, cfg.generation.temperature,
                                cfg.batch.micro_batch, cfg.engine.zero_stage, cfg.model.dtype, ref_model=ref_model)
    from rlscale.engines.learners.torch_learner import TorchLearner

    return TorchLearner(model, cfg.optim, spec, cfg.precision.lm_head_fp32, cfg.generation.temperature,
                        micro_batch=cfg.batch.micro_batch, ref_model=ref_model,
                        compiled=cfg.engine.compile and next(model.parameters()).is_cuda, max_width=max_width)


def build_source(cfg: RunConfig, sampler: RolloutSampler, model, run_dir: Path) -> RolloutSource:
    if cfg.offpolicy.name == "pipeline":
        from rlscale.train.offpolicy.pipeline import PipelineSource

        return PipelineSource(cfg.offpolicy, GeneratorSettings.of(cfg), cfg.batch, sampler, model, run_dir)
    return PPOOffPolicySource(sampler, cfg.batch.prompts, cfg.offpolicy.batches_per_version, model)


def build_components(cfg_in: DictConfig, run_dir: Path) -> Components:
    cfg = typed(cfg_in)
    device = prepare_process(cfg)
    task = build_task(cfg)
    model, tok = build_policy(cfg, task, device)
    generator = build_generator(GeneratorSettings.of(cfg), model, tok, device)
    compiles = cfg.engine.compile and device.type == "cuda"
    learner = build_learner(cfg, model, longest_sequence(task, tok, generator) if compiles else 0)
    split = len(task.train_problems())
    pool = NoPositiveResamplingPool(min(cfg.curriculum.pool_size, split) or split, cfg.curriculum.threshold,
                                    enabled=cfg.curriculum.name == "no_positive_resampling",
                                    window=cfg.curriculum.window)
    rng = torch.Generator().manual_seed(cfg.seed)
    meter = ComputeMeter(count_parameters(model), device.type,
                         torch.cuda.device_count() if device.type == "cuda" else 1)
    sampler = RolloutSampler(task, tok, generator, pool, cfg.batch.generations, cfg.filtering, cfg.length, rng, meter)
    source = build_source(cfg, sampler, model, run_dir)
    return Components(cfg, device, task, tok, model, generator, learner, pool, rng, meter, sampler, source)


def build_follower_learner(cfg_in: DictConfig):
    """Ranks > 0 of a DeepSpeed launch: the same policy and learner as rank 0, without the generator,
    curriculum or rollout source, which live on rank 0 alone."""
    cfg = typed(cfg_in)
    if cfg.engine.learner != "deepspeed":
        raise ValueError(f"engine.learner={cfg.engine.learner}: only the deepspeed learner runs on several ranks")
    device = prepare_process(cfg)
    model, _ = build_policy(cfg, build_task(cfg), device)
    return build_learner(cfg, model)
