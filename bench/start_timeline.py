"""Where the start of a run goes: a timeline, in seconds since the process began, of one run's imports,
component builds (task, policy, generator, learner, rollout source), Dynamo compilations, CUDA-graph
captures and first updates, for runs whose generator lives in the trainer process (PPO-off-policy).

    python bench/start_timeline.py RUN_DIR WORK_DIR [--steps N]   # RUN_DIR's config, N updates in WORK_DIR

Made for the target "a second run of the same shape trains within 30 s of its start" (docs/gpu-performance.md).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path


def process_age() -> float:
    """Seconds since this process was created (/proc), so interpreter start-up counts too."""
    ticks = os.sysconf("SC_CLK_TCK")
    start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    return float(Path("/proc/uptime").read_text().split()[0]) - start


def mark(what: str, began: float | None = None) -> None:
    now = process_age()
    took = f" ({now - began:6.2f} s)" if began is not None else ""
    print(f"{now:8.2f} s  {what}{took}", flush=True)


def timed(owner, name: str, label: str, first: int = 2) -> None:
    """Wrap ``owner.name`` so its first ``first`` calls print their span."""
    original = getattr(owner, name)
    calls = [0]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] > first:
            return original(*args, **kwargs)
        began = process_age()
        try:
            return original(*args, **kwargs)
        finally:
            mark(f"{label} #{calls[0]}", began)

    setattr(owner, name, wrapper)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("work_dir", type=Path)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    mark("interpreter up")
    began = process_age()
    import torch  # noqa: F401

    mark("import torch", began)
    began = process_age()
    import transformers  # noqa: F401

    mark("import transformers", began)
    began = process_age()
    from rlscale.config import load_run_config
    from rlscale.engines.compile_cost import STALLS
    from rlscale.engines.generators import graph_decode
    from rlscale.engines.learners import torch_learner
    from rlscale.train import components, loop, rollouts

    mark("import rlscale's trainer", began)
    for name in ("build_task", "build_policy", "build_generator", "build_learner", "build_source"):
        timed(components, name, name, first=1)
    timed(rollouts.RolloutSampler, "sample_batch", "generate a batch")
    timed(torch_learner.TorchLearner, "step", "learner step")
    timed(graph_decode.DecodeSession, "_capture", "capture decode graphs", first=20)
    timed(loop.RunLoop, "evaluate", "evaluate", first=1)
    from torch._dynamo.callback import callback_handler

    spans: list[float] = []
    callback_handler.register_start_callback(lambda *_: spans.append(process_age()))
    callback_handler.register_end_callback(lambda *_: mark("dynamo compilation", spans.pop()) if spans else None)
    STALLS.hook_compiler()
    from omegaconf import OmegaConf

    raw = OmegaConf.load(args.run_dir / "config.yaml")
    raw.trainer.max_steps, raw.trainer.eval_every, raw.out = args.steps, 10**6, str(args.work_dir)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(raw, args.work_dir / "config.yaml")
    cfg = load_run_config(args.work_dir / "config.yaml")
    began = process_age()
    state = loop.train(cfg, args.work_dir)
    mark(f"run ended {state}", began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
