"""The fused decode-layer kernels (rlscale.engines.fused_decode) against the unfused step's torch functions.

The Triton kernels run in Triton's CPU interpreter: ``TRITON_INTERPRET=1`` must be set before triton is
imported, so this file re-runs itself in a subprocess (``__main__`` below) that prints, per case, the
kernel's largest error and the largest error of a deliberately wrong answer (the negative control: it shows
the comparison can fail), relative to the reference's largest magnitude. Programmatic dependent launch
(``pdl=True``) needs a Hopper GPU: the ``gpu`` test checks it changes no bit.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Dict

import pytest
import torch
import torch.nn.functional as F

TOLERANCE = 1e-2  # of the largest |reference|: the kernels round once where eager bf16 rounds 2-3 times
SMALL = dict(bm=16, bn=32, bk=32, warps=4, stages=2)  # interpreter-sized tiles; K = 80 is not a multiple of bk
EPS = 1e-6


def _relative(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def _layer(hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int, bias: bool, qk_norm: bool,
           gen: torch.Generator):
    from rlscale.engines.static_decoder import _Layer

    def w(*shape, scale=0.1):
        return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16)

    qkv_rows = (heads + 2 * kv_heads) * head_dim
    return _Layer(ln1=1 + w(hidden), ln2=1 + w(hidden), qkv=w(qkv_rows, hidden), qkv_bias=w(qkv_rows) if bias else None,
                  o=w(hidden, heads * head_dim), o_bias=w(hidden) if bias else None,
                  q_norm=1 + w(head_dim) if qk_norm else None, k_norm=1 + w(head_dim) if qk_norm else None,
                  gate_up=w(2 * inter, hidden), down=w(hidden, inter))


def run_cases(device: str = "cpu", pdl: bool = False) -> Dict[str, list]:
    """name -> [kernel error, negative control error]; with ``pdl`` on CUDA, name -> [0/1 bitwise equal]."""
    from rlscale.engines.fused_decode import Tiles, interleave_gate_up, linear_residual, norm_qkv, norm_swiglu
    from rlscale.engines.static_decoder import residual_add, rms_norm, rotated_qkv, step_query

    tiles = Tiles(**SMALL)
    out: Dict[str, list] = {}
    batch, hidden, head_dim, inter, slots, slot = 5, 80, 32, 48, 8, 5
    for name, heads, kv_heads, bias, qk_norm in (("qwen2", 4, 2, True, False), ("qwen3", 4, 1, False, True),
                                                  ("llama", 2, 2, False, False)):
        gen = torch.Generator().manual_seed(len(name) + heads)
        layer = _layer(hidden, heads, kv_heads, head_dim, inter, bias, qk_norm, gen)
        x = torch.randn(batch, hidden, generator=gen).to(torch.bfloat16)
        angles = torch.arange(16)[:, None] * torch.rand(head_dim // 2, generator=gen)[None, :]
        cos = torch.cat([angles.cos(), angles.cos()], -1).to(torch.bfloat16)
        sin = torch.cat([angles.sin(), angles.sin()], -1).to(torch.bfloat16)
        pos = torch.tensor([3, 15, 0, 7, 9])
        dims = (heads, kv_heads, head_dim)
        kv_ref = torch.randn(batch, kv_heads, slots, 2 * head_dim, generator=gen).to(torch.bfloat16)
        slot_t = torch.tensor([slot])
        # reference: the unfused step, eager on CPU
        kv_ref_out = kv_ref.clone()
        q_ref = step_query(x, layer, cos[pos], sin[pos], dims, EPS, kv_ref_out, slot_t)
        q_plain, _, _ = rotated_qkv(x, layer, torch.ones_like(cos[pos]), torch.zeros_like(sin[pos]), dims, EPS)

        to = lambda t: None if t is None else t.to(device)  # noqa: E731
        kv = kv_ref.clone().to(device)
        q_out = torch.empty(batch, heads * head_dim, dtype=torch.bfloat16, device=device)
        norm_qkv(to(x), to(layer.ln1), to(layer.qkv), to(layer.qkv_bias), to(layer.q_norm), to(layer.k_norm),
                 to(cos), to(sin), to(pos), kv, to(slot_t), q_out, heads, kv_heads, EPS, pdl=False, tiles=tiles)
        gate_up = interleave_gate_up(*layer.gate_up.chunk(2)).to(device)
        h = torch.empty(batch, inter, dtype=torch.bfloat16, device=device)
        norm_swiglu(to(x), to(layer.ln2), gate_up, h, EPS, pdl=False, tiles=tiles)
        a = (torch.randn(batch, heads * head_dim, generator=gen)).to(torch.bfloat16)
        residual = x.clone().to(device)
        linear_residual(to(a), to(layer.o), to(layer.o_bias), residual, pdl=False, tiles=tiles)
        if pdl:  # the same launches with programmatic dependent launch must give the same bits
            kv2, q2, h2, r2 = kv_ref.clone().to(device), torch.empty_like(q_out), torch.empty_like(h), x.clone().to(device)
            norm_qkv(to(x), to(layer.ln1), to(layer.qkv), to(layer.qkv_bias), to(layer.q_norm), to(layer.k_norm),
                     to(cos), to(sin), to(pos), kv2, to(slot_t), q2, heads, kv_heads, EPS, pdl=True, tiles=tiles)
            norm_swiglu(to(x), to(layer.ln2), gate_up, h2, EPS, pdl=True, tiles=tiles)
            linear_residual(to(a), to(layer.o), to(layer.o_bias), r2, pdl=True, tiles=tiles)
            out[name] = [int(torch.equal(kv, kv2) and torch.equal(q_out, q2) and torch.equal(h, h2)
                             and torch.equal(residual, r2))]
            continue
        kv, q_out, h, residual = kv.cpu(), q_out.cpu(), h.cpu(), residual.cpu()
        out[f"{name}-q"] = [_relative(q_out, q_ref.flatten(1)), _relative(q_plain.flatten(1), q_ref.flatten(1))]
        out[f"{name}-cache_slot"] = [_relative(kv[:, :, slot], kv_ref_out[:, :, slot]),
                                     _relative(kv_ref[:, :, slot], kv_ref_out[:, :, slot])]
        others = [s for s in range(slots) if s != slot]
        out[f"{name}-cache_others_unchanged"] = [float(not torch.equal(kv[:, :, others], kv_ref[:, :, others])), 1.0]
        gate, up = F.linear(rms_norm(x, layer.ln2, EPS), layer.gate_up).chunk(2, dim=-1)
        h_ref = F.silu(gate) * up
        out[f"{name}-swiglu"] = [_relative(h, h_ref), _relative(gate * up, h_ref)]
        r_ref = residual_add(x, F.linear(a, layer.o, layer.o_bias))
        out[f"{name}-residual"] = [_relative(residual, r_ref), _relative(x, r_ref)]
    return out


@pytest.fixture(scope="module")
def kernel_errors() -> Dict[str, list]:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not importable (pip install triton): the Triton kernels cannot run, not even interpreted")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


CASE_NAMES = [f"{m}-{part}" for m in ("qwen2", "qwen3", "llama")
              for part in ("q", "cache_slot", "cache_others_unchanged", "swiglu", "residual")]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_fused_kernel_matches_unfused_step(kernel_errors: Dict[str, list], case: str):
    error, control = kernel_errors[case]
    assert error < TOLERANCE, f"{case}: relative error {error}"
    assert control > 2 * TOLERANCE, f"{case}: the wrong answer is within {control}: the comparison cannot fail"


def test_interleave_gate_up_in_place():
    from rlscale.engines.fused_decode import interleave_gate_up

    gate, up = torch.arange(6.).view(3, 2), -torch.arange(6.).view(3, 2)
    out = torch.empty(6, 2)
    assert interleave_gate_up(gate, up, out) is out
    assert out.tolist() == [[0, 1], [0, -1], [2, 3], [-2, -3], [4, 5], [-4, -5]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_programmatic_dependent_launch_changes_no_bit():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs Hopper (sm_90) or newer")
    assert run_cases("cuda", pdl=True) == {"qwen2": [1], "qwen3": [1], "llama": [1]}


if __name__ == "__main__":
    print(json.dumps(run_cases()))
