"""The training loop of one run: pull a batch from the rollout source, filter, compute advantages and
global aggregation weights, update, log, evaluate, checkpoint. Resumes from ``checkpoints/last.pt``.

Metrics (results contract): a train line per update, an eval line at step 0 and every
``trainer.eval_every`` steps and at the end. Steps count optimizer updates. Compilation is logged apart
from the compute (``rlscale.engines.compile_cost``): every train line carries ``compile_s``, the seconds
of its ``step_seconds`` spent compiling or capturing graphs (excluded from ``gpu_hours``), and the first
train line after a start or resume carries ``startup_s``, the wall seconds from the start of the run to
its first update (model load, engine construction, the step-0 eval with its compilation); every eval line
carries ``eval_s``, its wall seconds (the held-out split and the downstream sets), so ETAs count the evals.
"""
from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from rlscale.config.schema import RunConfig
from rlscale.core.types import TrainBatch
from rlscale.engines.compile_cost import STALLS
from rlscale.runfolder.errors import Refused
from rlscale.runfolder.lock import FolderLock
from rlscale.runfolder.metrics import MetricsLog, MetricsWriteError
from rlscale.runfolder.process import host
from rlscale.runfolder.truncation import WINDOW as TRUNCATION_WINDOW, TruncationWatch
from rlscale.runfolder.status import (RunState, prune_request, read_status, release_status_space,
                                      reserve_status_space, write_status)
from rlscale.rl import PoolExhausted, aggregation_weights, compute_advantages, zero_variance_keep
from rlscale.tasks.base import Problem
from rlscale.tasks.mixture import part_of
from rlscale.tracking import MetricsSink, TrackerMissing, completion_rows, open_tracker
from rlscale.train.batch import ScoredGroup, collate
from rlscale.train.checkpoint import (CHECKPOINT, CheckpointError, ResumeRefused, RunIdentity, check_resumable,
                                      load_checkpoint, remove_stale_temporaries, save_checkpoint)
from rlscale.train.components import (Components, build_components, build_follower_learner, follower_rank,
                                      serve_generator_task, tracked_run)
from rlscale.train.evaluate import evaluate
from rlscale.train.ranks import split_generator_tasks
from rlscale.train.records import versions_line

log = logging.getLogger("rlscale.train")


def file_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def cut_back(path: Path, size: int) -> int:
    """Truncate an append-only log to ``size`` bytes (its size at the checkpoint, a line end); return the
    number of lines removed (a torn last line counts as one)."""
    if file_size(path) <= size:
        return 0
    with open(path, "r+b") as fh:
        fh.seek(size)
        tail = fh.read()
        fh.truncate(size)
    return tail.count(b"\n") + (not tail.endswith(b"\n"))


class Diverged(RuntimeError):
    """NaN or inf in the loss or the gradients."""


class Pruned(RuntimeError):
    """The sweep asked the run to stop (prune.json in its folder); raised after an eval and a checkpoint."""


def prepare_batch(groups: List[ScoredGroup], comps: Components) -> tuple[TrainBatch, torch.Tensor, torch.Tensor, float]:
    """Collate, apply zero-variance filtering to the loss mask, compute advantages over the kept
    sequences and the aggregation weights over the whole batch. Returns (batch, advantages, weights,
    kept-prompt fraction)."""
    objective = comps.objective
    batch = collate(groups, comps.tok.pad_id)
    keep = torch.ones(batch.num_sequences, dtype=torch.bool)
    if objective.zero_variance:
        keep = zero_variance_keep(batch.rewards, batch.group_ids)
    advantages = torch.zeros(batch.num_sequences)
    if keep.any():
        advantages[keep] = compute_advantages(batch.rewards[keep], batch.group_ids[keep], objective.normalize,
                                              objective.normalization)
    batch.mask = batch.mask * keep.unsqueeze(-1).float()
    weights = aggregation_weights(batch.mask, batch.group_ids, objective.denominator_of)
    kept_fraction = float(keep.float().view(len(groups), -1).any(-1).float().mean())
    return batch, advantages, weights, kept_fraction


def lag_stats(batch: TrainBatch, version: int) -> Dict[str, float]:
    """Off-policy lag of the trained tokens: current version minus the version that sampled them."""
    sampled = batch.versions[batch.mask > 0] if (batch.mask > 0).any() else batch.versions[batch.versions >= 0]
    if sampled.numel() == 0:
        return {"lag_min": 0.0, "lag_mean": 0.0, "lag_max": 0.0}
    lag = (version - sampled).float()
    return {"lag_min": float(lag.min()), "lag_mean": float(lag.mean()), "lag_max": float(lag.max())}


def train_metrics(step: int, groups: List[ScoredGroup], result, comps: Components, kept: float,
                  lag: Dict[str, float], wall: float) -> dict:
    completions = [c for g in groups for c in g.completions]
    correct = [x for g in groups for x in g.correct]
    rewards = [r for g in groups for r in g.rewards]
    n = len(completions)
    gen_tokens = sum(len(c.tokens) for c in completions)
    truncation = sum(c.truncated for c in completions) / n
    record = {
        "step": step, "kind": "train", **comps.meter.as_metrics(),
        "reward": sum(rewards) / n, "pass_rate": sum(correct) / n, "truncation_rate": truncation,
        "interruption_rate": sum(c.interrupted for c in completions) / n,
        "response_tokens_mean": gen_tokens / n, "entropy": result.entropy, "loss": result.loss,
        "grad_norm": result.grad_norm, "clip_fraction": result.clip_fraction, "ratio_mean": result.ratio_mean,
        "kept_prompt_fraction": kept, "signal_fraction": comps.sampler.take_signal_fraction(),
        "pool_active": len(comps.pool.active()), "lr": comps.learner.scheduler.get_last_lr()[0],
        "samples_per_s": n / wall, "tokens_per_s": gen_tokens / wall, "step_seconds": wall, **lag,
    }
    if result.kl is not None:
        record["kl"] = result.kl
    return {**record, **part_metrics(groups, comps.task.train_problems())}


def part_metrics(groups: List[ScoredGroup], problems: List[Problem]) -> Dict[str, float]:
    """A mixture's batch per part (``rlscale.tasks.mixture``): ``reward/<part>``, ``pass_rate/<part>`` and
    ``samples/<part>``, over the part's samples of the batch; nothing for a single task."""
    by_part: Dict[str, List[ScoredGroup]] = {}
    for group in groups:
        name = part_of(problems[group.prompt_index])
        if name is not None:
            by_part.setdefault(name, []).append(group)
    record: Dict[str, float] = {}
    for name, mine in sorted(by_part.items()):
        rewards = [r for g in mine for r in g.rewards]
        record.update({f"reward/{name}": sum(rewards) / len(rewards),
                       f"pass_rate/{name}": sum(x for g in mine for x in g.correct) / len(rewards),
                       f"samples/{name}": len(rewards)})
    return record


class RunLoop:
    def __init__(self, cfg: RunConfig, run_dir: Path, sinks: Sequence[MetricsSink] = ()):
        self.started = time.perf_counter()
        self.startup_s: float | None = None
        self.run_dir = Path(run_dir)
        self.identity = RunIdentity.of(cfg, self.run_dir)
        self.tracker = open_tracker(cfg.logger, tracked_run(cfg, self.run_dir))
        self.sinks = (*sinks, *([self.tracker] if self.tracker is not None else []))
        self.cfg = cfg
        self.comps = build_components(cfg, self.run_dir)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.samples_path = self.run_dir / "samples.jsonl"
        self.step = 0
        self.truncating = False
        self.truncation = TruncationWatch(cfg.trainer.truncation_warn)

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict:
        c = self.comps
        return {"step": self.step, "model": c.model.state_dict(), "learner": c.learner.state_dict(),
                "rng": c.rng.get_state(), "torch_rng": torch.get_rng_state(), "pool": c.pool.state_dict(),
                "source": c.source.state_dict(), "compute": c.meter.state_dict(),
                "metrics_bytes": file_size(self.metrics_path), "samples_bytes": file_size(self.samples_path)}

    def restore(self) -> bool:
        ckpt = load_checkpoint(self.run_dir, self.identity)
        if ckpt is None:
            check_resumable(self.run_dir, self.identity)  # metrics beyond step 0 without a checkpoint are never deleted
            for path in (self.metrics_path, self.samples_path):  # killed before the first checkpoint: start over
                path.unlink(missing_ok=True)
            return False
        c = self.comps
        c.model.load_state_dict(ckpt["model"])
        c.learner.load_state_dict(ckpt["learner"])
        c.rng.set_state(ckpt["rng"])
        torch.set_rng_state(ckpt["torch_rng"])
        try:
            c.pool.load_state_dict(ckpt["pool"])
        except ValueError as err:
            raise ResumeRefused(f"{self.run_dir / CHECKPOINT}: {err}") from None
        c.source.load_state_dict(ckpt["source"])
        c.meter.load_state_dict(ckpt["compute"])
        self.step = ckpt["step"]
        for path, size in ((self.metrics_path, ckpt["metrics_bytes"]), (self.samples_path, ckpt.get("samples_bytes", 0))):
            removed = cut_back(path, size)  # lines after the checkpoint are produced again
            if removed:
                log.info("resumed at step %d: removed the %d line(s) of %s written after that checkpoint; they are "
                         "written again", self.step, removed, path.name)
        c.source.after_update(c.model, self.step)
        return True

    def checkpoint(self) -> None:
        save_checkpoint(self.run_dir, self.state(), self.identity)

    # -- work ----------------------------------------------------------------------------------
    def evaluate(self, metrics: MetricsLog) -> None:
        """The eval line; its first ``trainer.eval_samples_logged`` samples to samples.jsonl and its first
        ``logger.completions_rows`` to the tracker's completions table."""
        c, t = self.comps, self.cfg.trainer
        rows = self.cfg.logger.completions_rows if self.tracker is not None else 0
        start = time.perf_counter()
        result = evaluate(c.task, c.tok, c.generator, c.task.val_problems(), t.eval_samples, self.cfg.seed, self.step,
                          logged=max(t.eval_samples_logged, rows))
        samples = MetricsLog(self.samples_path)
        for record in result.samples[:t.eval_samples_logged]:
            samples.append(record)
        downstream = {key: value for entry in c.downstream
                      for key, value in entry.evaluate(c.tok, c.generator, self.cfg.seed, self.step).items()}
        metrics.append({"step": self.step, "kind": "eval", **c.meter.as_metrics(), **result.metrics(), **downstream,
                        "eval_s": time.perf_counter() - start})
        if rows and result.samples:
            self.tracker.completions(self.step, completion_rows(result.samples, rows))

    def update(self) -> dict:
        c = self.comps
        start, stalled = time.perf_counter(), STALLS.seconds
        first = self.startup_s is None
        if first:
            self.startup_s = start - self.started
        with c.meter.measure():
            groups = c.source.next_batch(self.step)
            batch, advantages, weights, kept = prepare_batch(groups, c)
            result = c.learner.step(batch, advantages, weights)
            extra = int(self.cfg.loss.tis_cap is not None) + int(self.cfg.loss.kl_coef > 0)
            c.meter.add_training(result.trained_tokens, extra_forwards=extra, follower_cpu_s=result.follower_cpu_s)
        if not (math.isfinite(result.loss) and math.isfinite(result.grad_norm)):
            raise Diverged(f"non-finite {'loss' if not math.isfinite(result.loss) else 'gradient norm'} "
                           f"at step {self.step + 1}")
        lag = lag_stats(batch, self.step)
        self.step += 1
        c.source.after_update(c.model, self.step)
        record = {**train_metrics(self.step, groups, result, c, kept, lag, time.perf_counter() - start),
                  "compile_s": STALLS.seconds - stalled, **c.source.metrics()}
        if first:
            record["startup_s"] = self.startup_s
        return record

    def run(self, stop_at: Optional[int] = None) -> None:
        """Train to ``trainer.max_steps``, or pause at ``stop_at`` (evaluated and checkpointed there). At
        each eval a prune request stops the run after a checkpoint (``Pruned``)."""
        t = self.cfg.trainer
        limit = t.max_steps if stop_at is None else min(t.max_steps, stop_at)
        resumed = self.restore()
        metrics = MetricsLog(self.metrics_path, self.sinks)
        if not resumed:
            self.evaluate(metrics)
            self.checkpoint()
        self.check_prune()
        while self.step < limit:
            try:
                record = self.update()
            except PoolExhausted:
                self.checkpoint()  # the step it ends at is sealed: a rerun finds the run finished
                raise
            metrics.append(record)
            self.watch_truncation(record["truncation_rate"])
            evaluated = self.step % t.eval_every == 0 or self.step in (t.max_steps, limit)
            if evaluated:
                self.evaluate(metrics)
            if self.step % t.checkpoint_every == 0 or self.step in (t.max_steps, limit):
                self.checkpoint()
            if evaluated:
                self.check_prune()

    def watch_truncation(self, rate: float) -> None:
        """Warn when the truncation rate rises back above ``trainer.truncation_warn`` (the paper's instability
        signal, Section 3.2; the rule: rlscale.runfolder.truncation) and say when it falls back; the steps in
        between are in metrics.jsonl, not repeated in the log."""
        reason = self.truncation.add(rate)
        if reason and not self.truncating:
            log.warning("step %d: truncation rate rising: %s (the paper's instability signal); logged again when "
                        "it falls back", self.step, reason)
        elif not reason and self.truncating:
            log.info("step %d: truncation rate back at or below %.0f%% (mean of the last %d steps %.0f%%)", self.step,
                     100 * self.truncation.level, TRUNCATION_WINDOW, 100 * self.truncation.mean)
        self.truncating = bool(reason)

    def check_prune(self) -> None:
        request = prune_request(self.run_dir)
        if request is not None:
            self.checkpoint()
            raise Pruned(str(request.get("reason", "pruned by its sweep")))

    def close(self) -> None:
        self.comps.source.close()
        self.comps.learner.close()
        for sink in self.sinks:
            sink.close()


def train(cfg: RunConfig, run_dir: Path, stop_at: Optional[int] = None,
          sinks: Sequence[MetricsSink] = ()) -> str:
    """Train or resume one run (pausing at step ``stop_at``: state pending); write status.json; return the
    final state. Ranks > 0 of a DeepSpeed launch only mirror rank 0's learner calls and write nothing
    (``rlscale.core.protocols.FollowerLearner``); the job's generator tasks (``launcher.generator_tasks``) serve
    rank 0's generation until the run is over.

    The run folder is locked for the whole run (rlscale.runfolder.lock), and a resume that would lose
    metrics or load a damaged checkpoint or another run's is refused (rlscale.train.checkpoint.
    check_resumable): both raise ``Refused`` before status.json or anything else is written. Temporary
    checkpoint files a killed writer left are then removed, and said so."""
    generator_task = split_generator_tasks(cfg.launcher.generator_tasks)
    if generator_task is not None:
        serve_generator_task(cfg, run_dir, generator_task)
        return RunState.DONE.value
    if follower_rank():
        build_follower_learner(cfg).follow()
        return RunState.DONE.value
    run_dir = Path(run_dir)
    with FolderLock(run_dir, "run folder"):
        check_resumable(run_dir, RunIdentity.of(cfg, run_dir))
        for stale in remove_stale_temporaries(run_dir):
            log.info("removed %s, a checkpoint write cut short", stale)
        return _train_locked(cfg, run_dir, stop_at, sinks)


def _train_locked(cfg: RunConfig, run_dir: Path, stop_at: Optional[int],
                  sinks: Sequence[MetricsSink]) -> str:
    log.info("training %s from step %s to %s; %s", run_dir, read_status(run_dir).get("step") or 0,
             stop_at or cfg.trainer.max_steps, versions_line())
    write_status(run_dir, RunState.RUNNING, pid=os.getpid(), host=host())
    reserve_status_space(run_dir)
    for sink in sinks:
        getattr(sink, "started", lambda: None)()
    loop = None
    early = {}
    try:
        loop = RunLoop(cfg, run_dir, sinks)
        loop.run(stop_at)
        state, reason = RunState.DONE, ""
        if loop.step < loop.cfg.trainer.max_steps:
            state, reason = RunState.PENDING, f"paused at step {loop.step} (pruning rung)"
    except Pruned as err:
        state, reason = RunState.PRUNED, str(err)
    except Diverged as err:
        state, reason = RunState.DIVERGED, str(err)
    except PoolExhausted as err:
        state, reason = RunState.DONE, f"stopped early: {err}"
        early = {"stopped_early": True, "max_steps": cfg.trainer.max_steps}
    except (CheckpointError, MetricsWriteError, Refused, TrackerMissing) as err:  # one line says it all
        log.error("run failed: %s", err)
        state, reason = RunState.FAILED, str(err)
    except Exception as err:  # any failure of this run is recorded, never hidden
        log.exception("run failed")
        state, reason = RunState.FAILED, f"{type(err).__name__}: {' '.join(str(err).split())}"[:500]
    finally:
        if loop is not None:
            loop.close()
    write_status(run_dir, state, reason, step=loop.step if loop else 0, **early)
    release_status_space(run_dir)
    return state.value
