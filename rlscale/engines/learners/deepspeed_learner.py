"""The DeepSpeed learner (``engine.learner=deepspeed``): data-parallel ZeRO stage 2 or 3
(``engine.zero_stage``) with the same update as ``TorchLearner``: AdamW with linear warm-up then a
constant lr (Section 2: lr 5e-7, eps 1e-15, weight decay 0.01, 100 warm-up steps; scaled by config),
gradient clipping, the FP32 LM head of Section 3.2 (``precision.lm_head_fp32``, through ``head_output``)
and gradient accumulation with the batch's global aggregation weights (Section 3.2: the prompt/sample/
token average is over the whole batch, so it must not change with the number of micro-batches or ranks).

Precision: on GPU a ``model.dtype=bfloat16`` policy trains in bf16 with fp32 master weights kept by the
ZeRO optimizer; otherwise (and always on CPU, where the process group is gloo) everything is fp32.

Long sequences: the head runs in chunks of positions and, with ``engine.activation_checkpointing``, each
decoder layer recomputes its activations in the backward, as in ``TorchLearner``; every rank checkpoints when
one does (under ZeRO-3 a recomputed layer gathers its parameters again, and the ranks' gathers must match).

Loss scaling. The caller's ``weights`` [N, L-1] already divide by the whole batch's denominators, so the
batch loss is sum(W * per_token) over all rows. Each rank takes a contiguous shard of the rows and
backpropagates its part of that sum, micro-batch by micro-batch (``batch.micro_batch`` sequences per rank
and pass; 0 = the whole shard). DeepSpeed *averages* gradients over the data-parallel ranks, so each
rank's loss is multiplied by the world size: the reduced gradient is then exactly the gradient of the
full-batch loss, as in ``TorchLearner``. DeepSpeed's own 1/gradient_accumulation_steps scaling is off
(one configured accumulation step; the boundary is set by hand on the last pass). ZeRO's collectives run
in every forward/backward, so every rank makes the same number of passes: a rank with fewer rows makes
weight-0 "ballast" passes.

Launch (torchrun, the ``deepspeed`` launcher, or one torchrun per node under ``srun``): every rank runs
``rlscale run ...`` with the same config. Rank 0 runs the whole loop (generation, evaluation, metrics,
checkpoints); ranks > 0 (``rlscale.train.components.follower_rank``) build only the same policy and learner and
call ``follow()``, which mirrors rank
0's learner calls (step, state_dict, load_state_dict) until rank 0 calls ``close()``. Rank 0 ships each
batch to the followers, so generation, the curriculum and the run directory stay on rank 0 alone. A
single process without a launcher gets a one-rank process group. Rank 0's checkpoint holds every rank's
optimizer shard, so a resume needs the same world size and ZeRO stage.

ZeRO-3 partitions the trained module's parameters, so on rank 0 it trains a copy and writes the
gathered weights back into the policy the generator samples from after every update (the paper's
trainers also push their weights to separate generators, Section 3.1).
"""
from __future__ import annotations

import atexit
import copy
import logging
import math
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from functools import partial
from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from rlscale.core.types import StepResult, TrainBatch
from rlscale.engines.learners.build import LearnerSettings
from rlscale.engines.learners.update import build_optimizer, micro_batch_loss, token_shares
from rlscale.engines.models.policy import checkpoint_layers, token_logprobs

log = logging.getLogger("rlscale.deepspeed")

ZERO_STAGES = (2, 3)
# Followers wait on rank 0 while it generates, evaluates and checkpoints; the wait is on a gloo group
# (no GPU watchdog) with a timeout longer than any generation phase.
FOLLOWER_TIMEOUT = timedelta(hours=24)
# The rendezvous and ZeRO's collectives: a rank that never arrives or stops answering fails the others
# within this bound (a rank whose process is gone fails them at once: gloo raises on the closed connection).
COLLECTIVE_TIMEOUT = timedelta(minutes=10)


class Command(str, Enum):
    """What rank 0 asks the followers to do with it."""

    STEP = "step"
    SAVE = "save"
    LOAD = "load"
    STOP = "stop"


@dataclass(frozen=True)
class Topology:
    """This process's place in the data-parallel group."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def leader(self) -> bool:
        return self.rank == 0


@dataclass(frozen=True)
class MicroBatch:
    """Rows of the batch for one forward/backward pass; ``ballast`` passes carry weight 0 and only keep
    the ranks' collective calls in step."""

    rows: torch.Tensor
    ballast: bool = False


def plan_micro_batches(num_rows: int, world_size: int, rank: int, micro_batch: int) -> List[MicroBatch]:
    """This rank's passes: its contiguous shard of the rows in chunks of ``micro_batch`` (0 = one chunk),
    padded with ballast passes to the largest shard's number of chunks."""
    shards = torch.arange(num_rows).tensor_split(world_size)
    largest = max(len(s) for s in shards)
    size = micro_batch if micro_batch > 0 else max(1, largest)
    mine = shards[rank]
    passes = [MicroBatch(mine[i:i + size]) for i in range(0, len(mine), size)]
    ballast = MicroBatch(torch.zeros(1, dtype=torch.long), ballast=True)
    return passes + [ballast] * (max(1, math.ceil(largest / size)) - len(passes))


class PolicyLogprobs(nn.Module):
    """The module DeepSpeed wraps: per-token log-probs and entropies of the policy with the LM head in
    the configured precision (Section 3.2). ``head_output`` reads the head weight directly rather than
    calling the lm_head module, so under ZeRO-3 the weight is registered as an external parameter of this
    module and gathered for its forward and backward. ``head_chunk``: positions per pass of the head
    (``rlscale.engines.models.policy.chunked_head_logprobs``)."""

    def __init__(self, policy: nn.Module, fp32_head: bool, temperature: float, head_chunk: int):
        super().__init__()
        self.policy = policy
        self.fp32_head = fp32_head
        self.temperature = temperature
        self.head_chunk = head_chunk

    def forward(self, input_ids: torch.Tensor, with_entropy: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        out = self.logprobs(self.policy, input_ids, with_entropy)
        return out.logp, out.entropy

    def logprobs(self, policy: nn.Module, input_ids: torch.Tensor, with_entropy: bool = False):
        """``token_logprobs`` of ``policy`` (this module's, or the KL reference) in this module's settings."""
        return token_logprobs(policy, input_ids, self.fp32_head, self.temperature, with_entropy=with_entropy,
                              chunk=self.head_chunk)


def _init_process_group(cuda: bool) -> Topology:
    """The default process group from the launcher's environment (env://), or a one-rank group on an
    in-memory store for a plain single process; nccl on GPU, gloo on CPU."""
    backend = "nccl" if cuda else "gloo"
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "RANK" not in os.environ:
        raise RuntimeError("engine.learner=deepspeed under srun with several tasks: start one torchrun per node "
                           "(srun --ntasks-per-node 1 torchrun ...), which gives each rank its RANK")
    if not dist.is_initialized():
        if "MASTER_ADDR" in os.environ and "WORLD_SIZE" in os.environ:
            dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
            atexit.register(_destroy_process_group)
        else:
            os.environ.setdefault("LOCAL_RANK", "0")  # what DeepSpeed's sanity check reads
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    return Topology(dist.get_rank(), dist.get_world_size(), device)


def _destroy_process_group() -> None:
    """At exit of a rank of a launch: destroy the process groups while Python still runs. Left to the
    interpreter's teardown, gloo's worker threads are destroyed in no set order and a rank can abort
    ("terminate called without an active exception") after its run ended well, which fails its SLURM step.
    The groups live for the whole process, since a job's ranks can train several runs in turn."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _to_cpu(obj: Any) -> Any:
    """Tensors of a (nested) optimizer state moved to CPU, so another rank can unpickle them."""
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def deepspeed_config(grad_clip: float, zero_stage: int, world_size: int, bf16: bool) -> dict:
    """One accumulation step per DeepSpeed step (the learner accumulates itself); the client AdamW is
    used as is (``zero_allow_untested_optimizer``), with ZeRO's global-norm clipping."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "train_batch_size": world_size,
        "gradient_clipping": grad_clip,
        "zero_optimization": {"stage": zero_stage},
        "bf16": {"enabled": bf16},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2 ** 62,
    }


class DeepSpeedLearner:
    """``TorchLearner``'s interface (``step``, ``scheduler``, ``state_dict``/``load_state_dict``) over a
    DeepSpeed ZeRO engine, plus ``follow`` (ranks > 0) and ``close`` (rank 0 releases the followers)."""

    def __init__(self, settings: LearnerSettings, model: nn.Module, ref_model: Optional[nn.Module] = None):
        """ZeRO stage ``settings.zero_stage``; batches keep their own width (``settings.max_width`` and
        ``settings.compiled`` are the torch learner's); ``ref_model``: the frozen KL reference, or None."""
        import deepspeed

        if settings.zero_stage not in ZERO_STAGES:
            raise ValueError(f"engine.zero_stage={settings.zero_stage}: expected one of {ZERO_STAGES}")
        if settings.dtype == "float16":
            raise ValueError("engine.learner=deepspeed: model.dtype=float16 needs loss scaling; use bfloat16")
        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        cuda = next(model.parameters()).device.type == "cuda"
        self.topo = _init_process_group(cuda)
        self.commands = dist.new_group(backend="gloo", timeout=FOLLOWER_TIMEOUT)
        bf16 = cuda and settings.dtype == "bfloat16"
        if not cuda:
            log.info("DeepSpeed learner on CPU: training in fp32 (gloo)")
        torch_dtype = torch.bfloat16 if bf16 else torch.float32
        self.loss, self.policy = settings.loss, settings.policy
        self.micro_batch = settings.micro_batch
        zero3 = settings.zero_stage == 3
        # ZeRO-3 partitions what it trains: rank 0 keeps ``model`` whole for its generator
        self.generator_model = model.to(self.topo.device, torch_dtype) if zero3 and self.topo.leader else None
        trained = copy.deepcopy(model) if self.generator_model is not None else model
        if self._on_any_rank(settings.checkpointing):
            checkpoint_layers(trained)
        self.module = PolicyLogprobs(trained.to(self.topo.device, torch_dtype), settings.fp32_head,
                                     settings.temperature, settings.head_chunk)
        if zero3:
            deepspeed.zero.register_external_parameter(self.module, trained.get_output_embeddings().weight)
        self.ref_model = ref_model.to(self.topo.device, torch_dtype).eval() if ref_model is not None else None
        optimizer, self.scheduler = build_optimizer(self.module, settings.optim)
        config = deepspeed_config(settings.optim.grad_clip, settings.zero_stage, self.topo.world_size, bf16)
        self.engine, _, _, _ = deepspeed.initialize(model=self.module, optimizer=optimizer,
                                                    lr_scheduler=self.scheduler, config=config)
        self.engine.eval()
        self.closed = False

    def _on_any_rank(self, flag: bool) -> bool:
        """``flag`` or'ed over the ranks: ranks on cards of different sizes can resolve
        ``engine.activation_checkpointing=auto`` apart, and under ZeRO-3 every rank must gather the same
        parameters in its backward (a checkpointed layer gathers them again to recompute)."""
        flags = torch.tensor([int(flag)])
        if self.topo.world_size > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.commands)
        return bool(flags.item())

    # -- rank 0's calls, mirrored by the followers ---------------------------------------------------
    def step(self, batch: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor) -> StepResult:
        """One optimizer update on ``batch`` with global ``weights`` [N, L-1] (loss = sum W * per_token)."""
        self._announce(Command.STEP, (batch, advantages, weights))
        return self._step(batch, advantages, weights)

    def state_dict(self) -> dict:
        """The scheduler and every rank's ZeRO optimizer shard (fp32 master weights and AdamW moments);
        the model's weights are saved by the caller from ``model``."""
        self._announce(Command.SAVE, None)
        return self._state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict()``'s output; the world size and ZeRO stage must be those it was saved with."""
        saved = (state["world_size"], state["zero_stage"])
        current = (self.topo.world_size, self.engine.zero_optimization_stage())
        if saved != current:
            raise ValueError(f"checkpoint of a DeepSpeed learner with (world size, ZeRO stage) {saved}; this run "
                             f"has {current}")
        self._announce(Command.LOAD, state["scheduler"])
        self._load(state["scheduler"], state["optimizer_shards"])

    def close(self) -> None:
        """Release the followers (rank 0; called once the run is over, however it ended)."""
        if self.topo.leader and not self.closed:
            try:
                self._announce(Command.STOP, None)
            except RuntimeError as err:  # a follower is gone (the run already fails for it): none to release
                log.warning("followers not released: %s", " ".join(str(err).split())[:300])
            else:
                self._part()
        self.closed = True

    def follow(self) -> None:
        """Ranks > 0: carry out rank 0's learner calls until it closes the learner."""
        while True:
            message: List[Any] = [None, None]
            dist.broadcast_object_list(message, src=0, group=self.commands)
            command, payload = Command(message[0]), message[1]
            if command is Command.STOP:
                self.closed = True
                self._part()
                return
            if command is Command.STEP:
                self._step(*payload)
            elif command is Command.SAVE:
                self._state_dict()
            else:
                self._load(payload, None)

    # -- what every rank does --------------------------------------------------------------------------
    def _part(self) -> None:
        """Once STOP is delivered, every rank waits for the others: no rank goes on to exit (and tear its
        connections down) while a peer still reads from it."""
        if self.topo.world_size > 1:
            dist.barrier(group=self.commands)

    def _announce(self, command: Command, payload: Any) -> None:
        if self.topo.world_size > 1:
            dist.broadcast_object_list([command.value, payload], src=0, group=self.commands)

    @torch.no_grad()
    def _scored(self, input_ids: torch.Tensor, reference: bool) -> torch.Tensor:
        """Log-probs of ``input_ids`` under the current weights (the TIS proximal policy) or the reference."""
        if reference:
            return self.module.logprobs(self.ref_model, input_ids).logp
        return self.engine(input_ids)[0]

    def _trained(self, input_ids: torch.Tensor, boundary: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """The trained pass; ``boundary`` on the last pass of the update (where the gradients are reduced)."""
        self.engine.set_gradient_accumulation_boundary(boundary)
        return self.engine(input_ids, with_entropy=True)

    def _step(self, batch: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor) -> StepResult:
        cpu0 = time.process_time()
        tokens_in_loss = float(batch.mask.sum())
        trained_tokens = int(batch.attention_mask.sum())
        with_kl = self.ref_model is not None
        if tokens_in_loss == 0:  # every prompt filtered out: no update, as in TorchLearner
            self.scheduler.step()
            return StepResult(loss=0.0, grad_norm=0.0, clip_fraction=0.0, ratio_mean=0.0, entropy=0.0,
                              kl=0.0 if with_kl else None, trained_tokens=trained_tokens)
        self.engine.train()
        dev = self.topo.device
        plan = plan_micro_batches(batch.num_sequences, self.topo.world_size, self.topo.rank, self.micro_batch)
        # as in TorchLearner: the batch (and the passes' row indices) move to the device once and the
        # statistics stay there until the update is done, so the micro-batches run without waiting for the host
        shares = token_shares(batch, [mb.rows for mb in plan])
        batch, advantages, weights = batch.to(dev), advantages.to(dev), weights.to(dev)
        pass_rows = [mb.rows.to(dev) for mb in plan]
        proximal = partial(self._scored, reference=False)
        reference = partial(self._scored, reference=True) if with_kl else None
        # summed over ranks: loss, clip fraction, ratio mean, entropy, kl (token-share weighted), then the
        # CPU seconds the followers spent on this update (rank 0's own are its compute meter's)
        totals = torch.zeros(6, dtype=torch.float64, device=dev)
        for i, (mb, rows, share) in enumerate(zip(plan, pass_rows, shares)):
            part = micro_batch_loss(batch.rows(rows), advantages[rows], weights[rows], self.policy, self.loss,
                                    partial(self._trained, boundary=i == len(plan) - 1), proximal, reference,
                                    share, tokens_in_loss)
            # DeepSpeed averages gradients over ranks; a ballast pass only keeps the collectives in step
            self.engine.backward(part.loss * (0.0 if mb.ballast else float(self.topo.world_size)))
            if not mb.ballast:
                totals[:5] += part.stats
        self.engine.step()
        totals = totals.cpu()  # the command group is gloo
        if not self.topo.leader:
            totals[5] = time.process_time() - cpu0
        dist.all_reduce(totals, group=self.commands)
        self.engine.eval()
        self._publish()
        loss, clip, ratio, entropy, kl, follower_cpu = totals.tolist()
        return StepResult(loss=loss, grad_norm=float(self.engine.get_global_grad_norm()), clip_fraction=clip,
                          ratio_mean=ratio, entropy=entropy, kl=kl if with_kl else None,
                          trained_tokens=trained_tokens, follower_cpu_s=follower_cpu)

    def _publish(self) -> None:
        """ZeRO-3: gather the updated weights, one parameter at a time, into rank 0's generator policy."""
        if self.engine.zero_optimization_stage() != 3:
            return
        import deepspeed

        targets = list(self.generator_model.parameters()) if self.generator_model is not None else None
        for i, param in enumerate(self.module.policy.parameters()):
            with deepspeed.zero.GatheredParameters([param]):
                if targets is not None:
                    targets[i].data.copy_(param.data)

    def _state_dict(self) -> Optional[dict]:
        shard = _to_cpu(self.engine.optimizer.state_dict())
        shards = [None] * self.topo.world_size if self.topo.leader else None
        dist.gather_object(shard, shards, dst=0, group=self.commands)
        if not self.topo.leader:
            return None
        return {"world_size": self.topo.world_size, "zero_stage": self.engine.zero_optimization_stage(),
                "optimizer_shards": shards, "scheduler": self.scheduler.state_dict()}

    def _load(self, scheduler_state: dict, shards: Optional[List[dict]]) -> None:
        """Each rank loads its own shard; ZeRO reads only its rank's entry of the list when the world size is
        unchanged. Stages 1-2 keep the module's weights outside the shards: rank 0's (just restored by the
        caller) are broadcast."""
        mine: List[Any] = [None]
        dist.scatter_object_list(mine, shards, src=0, group=self.commands)
        entries = [mine[0] if r == self.topo.rank else None for r in range(self.topo.world_size)]
        self.engine.optimizer.load_state_dict(entries, load_from_fp32_weights=True)
        self.scheduler.load_state_dict(scheduler_state)
        if self.engine.zero_optimization_stage() < 3:
            for param in self.module.parameters():
                dist.broadcast(param.data, src=0)
