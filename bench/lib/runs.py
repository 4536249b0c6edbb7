"""The run config of a benchmark: a workload's batch and lengths (interruption at exactly the think
budget), a shape's micro-batch, the LM-head precision (Section 3.2) and the off-policy mode."""
from __future__ import annotations

from lib.shapes import Shape
from lib.workloads import Workload
from rlscale.config.schema import RunConfig
from rlscale.rl.curriculum import CurriculumConfig
from rlscale.rl.length import InterruptionConfig
from rlscale.train.offpolicy.configs import PipelineConfig, PPOConfig


def run_config(work: Workload, shape: Shape, fp32_head: bool, offpolicy: str, device: str) -> RunConfig:
    cfg = RunConfig()
    cfg.engine.device = device
    cfg.model.dtype = "bfloat16" if device == "cuda" else "float32"
    cfg.generation.max_think_tokens = work.think
    cfg.generation.max_answer_tokens = work.answer
    cfg.length = InterruptionConfig(window=[work.think, work.think])
    cfg.precision.lm_head_fp32 = fp32_head
    cfg.precision.name = "fp32_head" if fp32_head else "bf16_head"
    cfg.batch.prompts, cfg.batch.generations, cfg.batch.micro_batch = work.prompts, work.generations, shape.micro_batch
    cfg.offpolicy = PipelineConfig(max_lag=8) if offpolicy == "pipeline" else PPOConfig(batches_per_version=1)
    cfg.curriculum = CurriculumConfig(name="uniform")
    cfg.optim.lr = 1e-6
    return cfg
