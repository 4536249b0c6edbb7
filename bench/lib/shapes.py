"""Model shapes benchmarked with random weights (SmolLM2-135M: Llama, 30 layers, GQA 9/3; a Qwen2-0.5B
shape: 24 layers, GQA 14/2, 152k vocabulary; a tiny shape for CPU smoke runs) and the cards' datasheet
peaks."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lib.workloads import BenchTokenizer

# dense bf16 and HBM bandwidth by datasheet (SXM parts); gpu_bench's env section measures both too
PEAKS = {"H200": (989.4e12, 4.8e12), "H100": (989.4e12, 3.35e12)}


@dataclass(frozen=True)
class Shape:
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    rope_theta: float
    micro_batch: int


SHAPES = {
    "smollm2-135m": Shape("llama", 576, 30, 9, 3, 1536, 49152, 100000.0, 32),
    "qwen2-0.5b": Shape("qwen2", 896, 24, 14, 2, 4864, 151936, 1000000.0, 32),
    "tiny": Shape("llama", 64, 2, 4, 2, 128, 512, 10000.0, 4),
}


def peaks(device: torch.device) -> tuple[float, float, str]:
    if device.type != "cuda":
        return float("nan"), float("nan"), "cpu"
    name = torch.cuda.get_device_name(device)
    for key, (flops, bw) in PEAKS.items():
        if key in name:
            return flops, bw, name
    return float("nan"), float("nan"), name


def build_model(shape: Shape, dtype: torch.dtype, device: str, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = BenchTokenizer(shape.vocab)
    common = dict(vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                  num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
                  intermediate_size=shape.intermediate, max_position_embeddings=4096, rope_theta=shape.rope_theta,
                  tie_word_embeddings=True, eos_token_id=tok.eos_id, pad_token_id=tok.pad_id, bos_token_id=0)
    config = LlamaConfig(**common) if shape.family == "llama" else Qwen2Config(**common)
    torch.manual_seed(seed)
    cls = LlamaForCausalLM if shape.family == "llama" else Qwen2ForCausalLM
    return cls(config).to(device=device, dtype=dtype).eval()
