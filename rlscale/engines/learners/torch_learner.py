"""The plain torch learner: AdamW with linear warm-up then a constant lr (Section 2: lr 5e-7, eps 1e-15,
weight decay 0.01, 100 warm-up steps; scaled here by config), gradient accumulation over micro-batches
with the batch's global aggregation weights (``rlscale.engines.learners.update``: the sum of the
micro-batch losses is exactly the full-batch loss), gradient clipping.

Precision. A policy held in bf16 (``model.dtype=bfloat16``, the GPU setting) computes forward and
backward in bf16 while the learner keeps fp32 master weights: each micro-batch's bf16 gradients are
added into fp32 master gradients, AdamW updates the masters and the bf16 weights are copied from them in
place (the generator reads those same weights, so the two agree on every parameter; a 5e-7 update of a
bf16 weight would otherwise round away). The LM head runs in FP32 or bf16 as ``fp32_head`` says
(Section 3.2). fp32 policies train in fp32. A batch moves to the model's device whole, once per update.

Long sequences (Section 2: 12,288 think + 2,048 answer tokens). The head runs over ``head_chunk`` positions at a
time (``chunked_head_logprobs``), so the float32 logits and their gradient exist for one chunk rather than the
micro-batch; with ``checkpointing`` (``engine.activation_checkpointing``) each decoder layer keeps only its input
for the backward and runs again there (``checkpoint_layers``). Neither changes the update beyond float rounding.

Speed (``compiled``, on CUDA): the log-prob pass is compiled by regions (``compile_logprobs``): each decoder
layer of the HF model and the head's pass (the head, log-softmax and entropy) go through ``torch.compile``,
which fuses the element-wise chains of the layers (RMSNorm casts, rotary, SiLU gate, residuals) and of the
full-vocabulary softmax in the forward and the backward. The layers share one compiled graph, so Dynamo
traces one layer rather than the whole stack: on an H200 with SmolLM2-135M (30 layers) the first update of a
process with a warm compile cache takes 3.2 s, against 27.9 s for one graph of the whole pass, and later
updates run at the same speed (``bench/results/learner_compile-H200.md``). It is
compiled once, at the first update, so responses growing or shrinking over a run never recompile it (a
recompile costs a minute or more against steps of a fraction of a second; compilation is kept off the
compute axis, ``rlscale.engines.compile_cost``): with ``max_width`` (the run's longest prompt plus its
longest completion) every batch is right-padded to that width rounded up to ``LENGTH_BLOCK`` and the pass
is compiled for that one static shape; without it batches are padded to a multiple of ``LENGTH_BLOCK``
(``length_bucket``) and the pass is compiled with every dimension dynamic. (Measured on an H200 with
SmolLM2-135M, a graph marked dynamic in the sequence alone still recompiled once, ~95 s, when a run's
responses shortened from ~31 to ~11 tokens and the padded width fell from 128 to 64.)
"""
from __future__ import annotations

from functools import partial
from typing import List, Tuple

import torch

from rlscale.core.types import StepResult, TrainBatch
from rlscale.engines.learners.build import LearnerSettings
from rlscale.engines.learners.update import build_optimizer, micro_batch_loss, token_shares
from rlscale.engines.models.policy import checkpoint_layers, head_logprobs, token_logprobs

LENGTH_BLOCK = 32


def length_bucket(width: int) -> int:
    """The padded width of a batch of ``width`` tokens: the next multiple of ``LENGTH_BLOCK``."""
    return -(-width // LENGTH_BLOCK) * LENGTH_BLOCK


class MasterWeights:
    """fp32 copies of a low-precision model's trainable parameters (see the module docstring)."""

    def __init__(self, params: List[torch.nn.Parameter]):
        self.params = params
        self.master = [torch.nn.Parameter(p.detach().float().clone()) for p in params]

    @torch.no_grad()
    def collect_grads(self) -> None:
        """Add the model's gradients into the masters' (fp32) and free them."""
        for p, m in zip(self.params, self.master):
            if p.grad is None:
                continue
            if m.grad is None:
                m.grad = p.grad.float()
            else:
                m.grad.add_(p.grad)
            p.grad = None

    @torch.no_grad()
    def write_back(self) -> None:
        for p, m in zip(self.params, self.master):
            p.copy_(m)

    @torch.no_grad()
    def load(self, tensors: List[torch.Tensor]) -> None:
        for m, t in zip(self.master, tensors):
            m.copy_(t)


def compile_logprobs(model, dynamic: bool):
    """``token_logprobs`` compiled by regions (see the module docstring): ``torch.compile`` on every decoder
    layer of ``model`` (in place; the layers share one graph) and on the head's pass; ``dynamic``: for every
    shape at once rather than for the first one. A model without the HF ``model.layers`` list is compiled
    whole. The head is compiled per chunk of positions (``chunked_head_logprobs``): chunks of ``head_chunk``
    and a shorter last one, two shapes."""
    shapes = True if dynamic else None  # None: static first, dynamic after a shape changes (torch.compile)
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        return torch.compile(token_logprobs, dynamic=shapes)
    for layer in layers:
        layer.compile(dynamic=shapes)
    return partial(token_logprobs, head=torch.compile(head_logprobs, dynamic=shapes))


def pad_columns(weights: torch.Tensor, batch: TrainBatch) -> torch.Tensor:
    """``weights`` [N, L-1] zero-padded to the columns of ``batch`` (already padded)."""
    return torch.nn.functional.pad(weights, (0, batch.mask.shape[1] - weights.shape[1]))


class TorchLearner:
    """``engine.learner=torch`` (``LearnerSettings``; ``ref_model``: the frozen KL reference, or None)."""

    def __init__(self, settings: LearnerSettings, model, ref_model=None):
        self.model = model
        self.optim = settings.optim
        self.loss, self.policy = settings.loss, settings.policy
        self.fp32_head = settings.fp32_head
        self.temperature = settings.temperature
        self.micro_batch = settings.micro_batch
        self.ref_model = ref_model
        self.compiled = settings.compiled
        self.max_width = settings.max_width
        self.head_chunk = settings.head_chunk
        if settings.checkpointing:
            checkpoint_layers(model)
        self.logprobs = compile_logprobs(model, dynamic=not self.max_width) if self.compiled else token_logprobs
        first = next(model.parameters())
        self.device = first.device
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.master = MasterWeights(trainable) if first.dtype in (torch.bfloat16, torch.float16) else None
        params = self.master.master if self.master is not None else trainable
        self.optimizer, self.scheduler = build_optimizer(model, self.optim, params, fused=self.device.type == "cuda")

    def _micro_batches(self, n: int) -> List[slice]:
        size = self.micro_batch if self.micro_batch > 0 else n
        return [slice(i, min(n, i + size)) for i in range(0, n, size)]

    def padded_width(self, width: int) -> int:
        """The width a batch of ``width`` tokens is padded to when compiled (see the module docstring)."""
        return length_bucket(max(width, self.max_width))

    def _logprobs(self, model, input_ids: torch.Tensor, with_entropy: bool = False):
        return self.logprobs(model, input_ids, self.fp32_head, self.temperature, with_entropy=with_entropy,
                             chunk=self.head_chunk)

    @torch.no_grad()
    def _scored(self, model, input_ids: torch.Tensor) -> torch.Tensor:
        return self._logprobs(model, input_ids).logp

    def _trained(self, input_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        out = self._logprobs(self.model, input_ids, with_entropy=True)
        return out.logp, out.entropy

    def step(self, batch: TrainBatch, advantages: torch.Tensor, weights: torch.Tensor) -> StepResult:
        """One optimizer update on ``batch`` with global ``weights`` [N, L-1] (loss = sum W * per_token)."""
        self.model.train()
        dev = self.device
        stats = torch.zeros(5, dtype=torch.float64, device=dev)  # loss, clip, ratio, entropy, kl
        kl_seen = False
        tokens_in_loss = float(batch.mask.sum())
        micro_batches = self._micro_batches(batch.num_sequences)
        shares = token_shares(batch, micro_batches)
        # the whole batch moves once: a copy from pageable host memory waits for the stream, so a copy per
        # micro-batch would drain the GPU's queue between micro-batches
        if self.compiled:
            batch = batch.padded(self.padded_width(batch.input_ids.shape[1]))
            weights = pad_columns(weights, batch)
        batch, advantages, weights = batch.to(dev), advantages.to(dev), weights.to(dev)
        proximal = partial(self._scored, self.model)
        reference = partial(self._scored, self.ref_model) if self.ref_model is not None else None
        self.optimizer.zero_grad(set_to_none=True)
        for rows, share in zip(micro_batches, shares):
            part = micro_batch_loss(batch.rows(rows), advantages[rows], weights[rows], self.policy, self.loss,
                                    self._trained, proximal, reference, share, tokens_in_loss)
            part.loss.backward()
            if self.master is not None:
                self.master.collect_grads()
            kl_seen = kl_seen or part.has_kl
            stats += part.stats
        params = self.master.master if self.master is not None else self.optimizer.param_groups[0]["params"]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.optim.grad_clip)
        if torch.isfinite(grad_norm) and tokens_in_loss > 0:
            self.optimizer.step()
            if self.master is not None:
                self.master.write_back()
        self.scheduler.step()
        self.model.eval()
        loss, clip, ratio, entropy, kl = stats.tolist()
        return StepResult(loss=loss, grad_norm=float(grad_norm), clip_fraction=clip, ratio_mean=ratio,
                          entropy=entropy, kl=kl if kl_seen else None,
                          trained_tokens=int(batch.attention_mask.sum()))

    def close(self) -> None:
        """Nothing to release (the DeepSpeed learner releases its follower ranks here)."""

    def state_dict(self) -> dict:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}
        if self.master is not None:
            state["master"] = [m.detach().cpu() for m in self.master.master]
        return state

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.master is not None:  # a state saved without masters restarts them from the loaded model
            self.master.load(state.get("master", self.master.params))
