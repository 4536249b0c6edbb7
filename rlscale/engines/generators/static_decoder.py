"""A decode-only forward of Llama / Qwen2 / Qwen3-shaped transformers models over a preallocated KV cache.

The generator of the paper is vLLM (Section 2); on the lent GPUs the native torch generator takes its
place, and per decode step it must read little more than the weights and the live KV cache. HF's
``DynamicCache`` grows its tensors (a copy per step) and rebuilds masks on the host; here the cache is
allocated once per batch (``StaticKVCache``), the new key/value is written into slot ``slot`` with
``index_copy_`` (one slot for every row) or a per-row indexed store (each row at its own slot, the refilling
generator's rows) and attention reads the first ``kv_len`` slots (each row's own length, for those rows), so
every tensor has a fixed shape and address: a decode step can be captured in a CUDA graph
(``rlscale.engines.generators.graph_decode``).
``prefill`` writes prompts into all rows of a cache or into chosen ones (a row refilled with a new prompt).

The weights are the HF model's own tensors (layer norms, output and down projections, embedding), plus
copies made by ``refresh``: q/k/v fused into one matrix, gate/up into one (one GEMM instead of three or
two per layer) and the LM head in the precision of Section 3.2 (FP32 head for ScaleRL, bf16 for the
baseline), so the FP32 head costs no cast of the head weight per step. ``refresh`` must follow every
change of the model's weights (PipelineRL's in-flight update copies them in place; the generator calls
it when the version changes and at the start of every ``generate``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F

from rlscale.engines.kernels.decode_attention import available, decode_attention, decode_attention_reference
from rlscale.engines.models.policy import fp32_head_matmul

SUPPORTED_TYPES = ("llama", "qwen2", "qwen3")


def supports(model) -> bool:
    """True for the causal LMs this decoder reproduces: Llama, Qwen2, Qwen3 (SiLU MLP, no sliding window,
    rotary embeddings whose table does not depend on the sequence length)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in SUPPORTED_TYPES:
        return False
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "use_sliding_window", False):
        return False
    rope_type = getattr(getattr(model.model, "rotary_emb", None), "rope_type", "default")
    return "dynamic" not in str(rope_type)


@dataclass
class StaticKVCache:
    """Every slot's key and value side by side, ``kv`` [layers, batch, kv_heads, slots, 2 * head_dim] (one
    store writes both), and the attendable slots ``mask`` [batch, slots]."""

    kv: torch.Tensor
    mask: torch.Tensor

    @property
    def slots(self) -> int:
        return self.kv.shape[3]

    @property
    def keys(self) -> torch.Tensor:
        """[layers, batch, kv_heads, slots, head_dim], a view."""
        return self.kv[..., :self.kv.shape[-1] // 2]

    @property
    def values(self) -> torch.Tensor:
        return self.kv[..., self.kv.shape[-1] // 2:]


@dataclass
class _Layer:
    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: Optional[torch.Tensor]
    o: torch.Tensor
    o_bias: Optional[torch.Tensor]
    q_norm: Optional[torch.Tensor]
    k_norm: Optional[torch.Tensor]
    gate_up: torch.Tensor
    down: torch.Tensor


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's Llama/Qwen RMSNorm: normalised in fp32, cast back, then scaled."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF's ``apply_rotary_pos_emb`` for one of q / k."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rotated_qkv(x: torch.Tensor, layer: _Layer, cos: torch.Tensor, sin: torch.Tensor,
                dims: tuple[int, int, int], eps: float):
    """q [.., heads, D], k and v [.., kv_heads, D] of ``layer``'s normalised input, q and k rotated;
    ``dims`` = (heads, kv_heads, head_dim)."""
    heads, kv_heads, head_dim = dims
    qkv = F.linear(rms_norm(x, layer.ln1, eps), layer.qkv, layer.qkv_bias)
    q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q, k, v = q.unflatten(-1, (heads, head_dim)), k.unflatten(-1, (kv_heads, head_dim)), v.unflatten(-1, (kv_heads, head_dim))
    if layer.q_norm is not None:
        q, k = rms_norm(q, layer.q_norm, eps), rms_norm(k, layer.k_norm, eps)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return rotate(q, cos, sin), rotate(k, cos, sin), v


def step_query(x: torch.Tensor, layer: _Layer, cos: torch.Tensor, sin: torch.Tensor, dims: tuple[int, int, int],
               eps: float, kv: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    """A decode step's rotated q [B, heads, D] of ``layer``; its k and v are written into slot ``slot`` of the
    layer's cache ``kv`` [B, kv_heads, slots, 2D] (``write_slot``). Compiled, the write is the indexed store
    of the kernel that rotates k (two ``index_copy_`` launches per layer otherwise: 7.8 % of a Qwen2-0.5B
    step on an H200)."""
    q, k, v = rotated_qkv(x, layer, cos, sin, dims, eps)
    write_slot(kv, slot, torch.cat([k, v], dim=-1))
    return q


def write_slot(kv: torch.Tensor, slot: torch.Tensor, new: torch.Tensor) -> None:
    """``new`` [B, kv_heads, 2D] into ``kv`` [B, kv_heads, slots, 2D] at ``slot``: [1], the same slot for every
    row, or [B], each row's own. Both are indexed stores that inductor keeps in place; a ``scatter_`` here
    compiled into a copy of the layer's whole cache and a copy back, every step (78 % of a 48-row Qwen3-1.7B
    step at kv_len 8,192 on an H200, ``bench/profile_step.py --own-lengths``)."""
    if slot.shape[0] == 1:
        kv.index_copy_(2, slot, new.unsqueeze(2))
    else:
        rows = torch.arange(kv.shape[0], device=kv.device).unsqueeze(1)
        heads = torch.arange(kv.shape[1], device=kv.device).unsqueeze(0)
        kv.index_put_((rows, heads, slot.unsqueeze(1)), new)


def residual_add(x: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """``x + update`` rounded as a bf16 add rounds (both in fp32, one rounding). Written through fp32 so that
    inductor does not fold the add into an ``addmm`` whose output must first receive a copy of ``x`` (two
    device copies per layer); the add then fuses into the next RMSNorm's kernel."""
    return (x.float() + update.float()).to(x.dtype)


def layer_output(x: torch.Tensor, attn: torch.Tensor, layer: _Layer, eps: float) -> torch.Tensor:
    """The residual stream after ``layer``, from its input and its attention output (SiLU-gated MLP)."""
    x = residual_add(x, F.linear(attn, layer.o, layer.o_bias))
    gate, up = F.linear(rms_norm(x, layer.ln2, eps), layer.gate_up).chunk(2, dim=-1)
    return residual_add(x, F.linear(F.silu(gate) * up, layer.down))


def layer_then_next_query(x: torch.Tensor, attn: torch.Tensor, layer: _Layer, following: _Layer, cos: torch.Tensor,
                          sin: torch.Tensor, dims: tuple[int, int, int], eps: float, kv: torch.Tensor,
                          slot: torch.Tensor):
    """(residual stream after ``layer``, ``step_query`` of ``following`` into its cache ``kv``): one compiled
    graph, so the last residual add of a layer and the first norm of the next are one kernel."""
    x = layer_output(x, attn, layer, eps)
    return x, step_query(x, following, cos, sin, dims, eps, kv, slot)


def last_layer_output(x: torch.Tensor, attn: torch.Tensor, layer: _Layer, norm: torch.Tensor, eps: float) -> torch.Tensor:
    """The final hidden state: the last layer's output through the model's final norm."""
    return rms_norm(layer_output(x, attn, layer, eps), norm, eps)


class StaticKVDecoder:
    """Prefill and single-token decode steps of ``model`` (see the module docstring)."""

    def __init__(self, model, fp32_head: bool, compiled: bool = False):
        cfg = model.config
        self.model = model
        self.fp32_head = fp32_head
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = model.model.embed_tokens.weight
        self.dtype = self.embed.dtype
        self.device = self.embed.device
        self.attend = decode_attention if available(self.device) else decode_attention_reference
        self.layers: List[_Layer] = []
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            projections = (attn.q_proj, attn.k_proj, attn.v_proj)
            biased = attn.q_proj.bias is not None
            self.layers.append(_Layer(
                ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
                qkv=torch.cat([p.weight for p in projections]).detach(),
                qkv_bias=torch.cat([p.bias for p in projections]).detach() if biased else None,
                o=attn.o_proj.weight, o_bias=attn.o_proj.bias,
                q_norm=attn.q_norm.weight if hasattr(attn, "q_norm") else None,
                k_norm=attn.k_norm.weight if hasattr(attn, "k_norm") else None,
                gate_up=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach(), down=mlp.down_proj.weight))
        self.norm = model.model.norm.weight
        # the FP32 head reads bf16 weights as they are (rlscale.engines.models.policy.fp32_head_matmul)
        head = model.get_output_embeddings().weight
        self.head = head if head.dtype == torch.bfloat16 or fp32_head else head.detach().to(torch.bfloat16)
        self._cos = self._sin = torch.empty(0)
        # decode steps: the per-layer elementwise work (norms, rotary, SiLU gate, residuals) fused by
        # torch.compile around cuBLAS GEMMs, from one layer's attention output to the next layer's q, k, v;
        # shapes are static (one compile per batch bucket); inductor's combo kernels launch the independent
        # rotation of q and cache write of k and v as one kernel (1.02x per step, H200). Prefill: the same
        # pieces with dynamic shapes (prompt widths vary); eager, the prefill of 256 x 128 tokens of
        # Qwen2-0.5B took 0.1 s on an H200
        self.dims = (self.heads, self.kv_heads, self.head_dim)

        def compile_(fn, dynamic: bool = False):
            if not compiled:
                return fn
            return torch.compile(fn, dynamic=dynamic, fullgraph=True, options={"combo_kernels": not dynamic})

        self.step_first = compile_(step_query)
        self.step_between, self.step_last = compile_(layer_then_next_query), compile_(last_layer_output)
        self.prefill_qkv, self.prefill_output = compile_(rotated_qkv, True), compile_(layer_output, True)

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the model's current weights into the fused and re-typed copies (in place: captured graphs
        keep reading the same addresses)."""
        for mine, layer in zip(self.layers, self.model.model.layers):
            attn, mlp = layer.self_attn, layer.mlp
            torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], out=mine.qkv)
            if mine.qkv_bias is not None:
                torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias], out=mine.qkv_bias)
            torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight], out=mine.gate_up)
        head = self.model.get_output_embeddings().weight
        if self.head is not head:
            self.head.copy_(head)

    # -- buffers ---------------------------------------------------------------------------------
    def new_cache(self, batch: int, slots: int) -> StaticKVCache:
        shape = (len(self.layers), batch, self.kv_heads, slots, 2 * self.head_dim)
        return StaticKVCache(torch.zeros(shape, dtype=self.dtype, device=self.device),
                             torch.zeros((batch, slots), dtype=torch.bool, device=self.device))

    @torch.no_grad()
    def rope_table(self, positions: int) -> None:
        """cos / sin of the rotary embedding for positions 0..positions-1 (HF's own ``rotary_emb``)."""
        if self._cos.shape[0] >= positions:
            return
        ids = torch.arange(positions, device=self.device).unsqueeze(0)
        probe = torch.empty(1, dtype=self.dtype, device=self.device)
        cos, sin = self.model.model.rotary_emb(probe, ids)
        self._cos, self._sin = cos[0], sin[0]

    @torch.no_grad()
    def prefill(self, cache: StaticKVCache, ids: torch.Tensor, attn: torch.Tensor, rows: Optional[torch.Tensor] = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the left-padded prompts ``ids`` [B, W] (``attn`` 1 on real tokens) into slots 0..W-1 of
        ``cache``'s rows ``rows`` (B indices; default: every row, B of them), every other slot of those rows
        cleared; returns (final hidden state of the last position [B, hidden], next position [B])."""
        batch, width = ids.shape
        into = slice(None) if rows is None else rows
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        self.rope_table(cache.slots)
        cos, sin = self._cos[positions], self._sin[positions]
        real = attn.bool()
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        # padding queries attend to themselves only, so no row is empty (no NaN reaches the cache)
        allowed = (causal & real[:, None, :]) | torch.eye(width, dtype=torch.bool, device=ids.device)
        allowed = allowed.unsqueeze(1)
        live = torch.zeros((batch, cache.slots), dtype=torch.bool, device=ids.device)
        live[:, :width] = real
        cache.mask[into] = live
        groups = self.heads // self.kv_heads
        x = F.embedding(ids, self.embed)
        for i, layer in enumerate(self.layers):
            q, k, v = self.prefill_qkv(x, layer, cos, sin, self.dims, self.eps)
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            cache.keys[i, into, :, :width] = k
            cache.values[i, into, :, :width] = v
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.repeat_interleave(groups, dim=1),
                                                 v.repeat_interleave(groups, dim=1), attn_mask=allowed)
            x = self.prefill_output(x, out.transpose(1, 2).flatten(2), layer, self.eps)
        return rms_norm(x[:, -1], self.norm, self.eps), positions[:, -1] + 1

    @torch.no_grad()
    def decode(self, cache: StaticKVCache, token: torch.Tensor, pos: torch.Tensor, slot: torch.Tensor,
               kv_len: int) -> torch.Tensor:
        """One step: ``token`` [B] at positions ``pos`` [B] is written to slot ``slot`` (on the device: [1], one
        slot for every row, or [B], each row's own) and attends to slots 0..kv_len-1 (``kv_len`` > slot);
        returns the final hidden state [B, hidden]. Every row attends to its new slot, so a finished row never
        attends to nothing."""
        batch = token.shape[0]
        cos, sin = self._cos[pos], self._sin[pos]
        if slot.shape[0] == 1:
            cache.mask.index_fill_(1, slot, True)
        else:
            cache.mask.scatter_(1, slot.unsqueeze(1), True)
        groups = self.heads // self.kv_heads
        x = F.embedding(token, self.embed)
        q = self.step_first(x, self.layers[0], cos, sin, self.dims, self.eps, cache.kv[0], slot)
        keys, values = cache.keys, cache.values
        lengths = slot + 1 if slot.shape[0] > 1 else None  # rows of their own lengths: each reads its live slots
        for i, layer in enumerate(self.layers):
            # grouped-query attention without repeating the cache (rlscale.engines.kernels.decode_attention); the
            # cache write stays outside the attention kernel: inside it, it cost the kernel 1.3-1.5x (H200)
            out = self.attend(q.view(batch, self.kv_heads, groups, self.head_dim), keys[i], values[i], cache.mask,
                              kv_len, lengths=lengths).reshape(batch, self.heads * self.head_dim)
            if i + 1 < len(self.layers):
                x, q = self.step_between(x, out, layer, self.layers[i + 1], cos, sin, self.dims, self.eps,
                                         cache.kv[i + 1], slot)
        return self.step_last(x, out, self.layers[-1], self.norm, self.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] with the head in the precision of ``rlscale.engines.models.policy.head_logits``: float32
        from the FP32 head; bf16 from the bf16 head, the values ``head_logits`` casts to float32, left for
        the consumer to upcast as it reads them (a separate cast of [B, V] took 6 % of a Qwen2-0.5B decode
        step on an H200)."""
        if self.fp32_head:
            return fp32_head_matmul(self.head, hidden)
        return F.linear(hidden.to(torch.bfloat16), self.head)

    # -- accounting --------------------------------------------------------------------------------
    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads (the embedding rows it gathers are negligible)."""
        tensors = [self.norm, self.head] + [t for layer in self.layers for t in vars(layer).values() if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    def kv_bytes_per_token(self) -> int:
        return 2 * len(self.layers) * self.kv_heads * self.head_dim * self.embed.element_size()
