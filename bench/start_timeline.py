"""Where the start of a run goes: a timeline, in seconds since the run's process began, of its imports,
component builds (task, policy, generator, learner, rollout source), Dynamo compilations, CUDA-graph
captures, evaluations and first updates, in the trainer and in PipelineRL's generator processes alike
(they read ``bench/timeline_site/sitecustomize.py`` at start-up and print their own lines, marked ``gen``).

    python bench/start_timeline.py RUN_DIR WORK_DIR [--steps N]   # RUN_DIR's config, N updates in WORK_DIR

On the CPU, a RUN_DIR of the embedded default (its ``config.yaml``) and ``--steps 2`` take seconds.

Made for the target "a second run of the same shape trains within 30 s of its start" (docs/gpu-performance.md).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

SITE = Path(__file__).resolve().parent / "timeline_site"


def process_start() -> float:
    """This process's creation time, seconds since the epoch (/proc), so interpreter start-up counts too."""
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime"))
    return boot + started


def now() -> float:
    return time.time() - float(os.environ["START_TIMELINE_T0"])


def mark(what: str, began: float | None = None) -> None:
    took = f" ({now() - began:6.2f} s)" if began is not None else ""
    who = "" if str(os.getpid()) == os.environ.get("START_TIMELINE_PID") else f"gen {os.getpid()}: "
    print(f"{now():8.2f} s  {who}{what}{took}", file=sys.stderr, flush=True)


def timed(owner, name: str, label: str, first: int = 2) -> None:
    """Wrap ``owner.name`` so its first ``first`` calls print their span."""
    original = getattr(owner, name)
    calls = [0]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] > first:
            return original(*args, **kwargs)
        began = now()
        try:
            return original(*args, **kwargs)
        finally:
            mark(f"{label} #{calls[0]}", began)

    setattr(owner, name, wrapper)


def install() -> None:
    """Wrap the trainer's and the generators' start-up steps (once per process)."""
    if getattr(install, "done", False):
        return
    install.done = True
    began = now()
    import torch  # noqa: F401
    import transformers  # noqa: F401

    mark("import torch and transformers", began)
    from rlscale.engines.compile_cost import STALLS
    from rlscale.engines.generators import graph_decode, torch_generator
    from rlscale.engines.learners import torch_learner
    from rlscale.train import components, loop, rollouts
    from rlscale.train.offpolicy import pipeline_workers

    for name in ("build_task", "build_policy", "build_generator", "build_learner", "build_source"):
        timed(components, name, name, first=1)
    timed(pipeline_workers, "build_generator", "build_generator", first=1)
    timed(pipeline_workers.PolicyReplica, "__init__", "policy replica", first=1)
    timed(torch_generator.TorchGenerator, "generate", "generate")
    timed(rollouts.RolloutSampler, "sample_batch", "sample a batch")
    timed(torch_learner.TorchLearner, "step", "learner step")
    timed(graph_decode.DecodeBucket, "_capture", "capture decode graphs", first=20)
    timed(loop.RunLoop, "evaluate", "evaluate", first=1)
    timed(loop.RunLoop, "update", "update", first=3)
    from torch._dynamo.callback import callback_handler

    spans: list[float] = []
    callback_handler.register_start_callback(lambda *_: spans.append(now()))
    callback_handler.register_end_callback(lambda *_: mark("dynamo compilation", spans.pop()) if spans else None)
    STALLS.hook_compiler()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("work_dir", type=Path)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    if "START_TIMELINE_T0" not in os.environ:  # started without the site folder: children print nothing
        os.environ["START_TIMELINE_T0"] = str(process_start())
    os.environ["START_TIMELINE_PID"] = str(os.getpid())
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SITE), str(SITE.parent), os.environ.get("PYTHONPATH", "")])
    mark("interpreter up")
    install()
    from omegaconf import OmegaConf

    from rlscale.config import load_run_config, typed
    from rlscale.train import loop

    raw = OmegaConf.load(args.run_dir / "config.yaml")
    raw.trainer.max_steps, raw.trainer.eval_every, raw.out = args.steps, 10**6, str(args.work_dir)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(raw, args.work_dir / "config.yaml")
    cfg = typed(load_run_config(args.work_dir / "config.yaml"))
    began = now()
    state = loop.train(cfg, args.work_dir)
    mark(f"run ended {state}", began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
