"""The decode-step attention kernel (rlscale.engines.kernels.decode_attention) against its SDPA reference.

The Triton kernel runs in Triton's CPU interpreter: ``TRITON_INTERPRET=1`` must be set before triton is
imported, so this file re-runs itself in a subprocess (``__main__`` below) that prints the error of every
case as JSON; the tests compare those errors with the tolerances.
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

# name -> (batch, kv_heads, groups, head_dim, slots, kv_len, plan kwargs or None for the default plan)
CASES = {
    "g1_default": (3, 2, 1, 64, 160, 150, None),
    "g3_default": (3, 3, 3, 64, 160, 150, None),
    "g7_default": (2, 2, 7, 64, 96, 77, None),
    "g3_split3_block32": (3, 3, 3, 64, 160, 150, dict(block_n=32, splits=3)),
    "g7_split2_block64": (2, 2, 7, 64, 200, 190, dict(block_n=64, splits=2)),
    "g7_block128": (2, 2, 7, 64, 200, 190, dict(block_n=128)),
    "g3_split4_block16_headdim80": (2, 1, 3, 80, 64, 61, dict(block_n=16, splits=4)),
}
TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2}  # bf16: output rounding plus p rounded to bf16 for p @ v
LAYER = 1  # keys / values are the halves of layer 1 of a [layers, B, KVH, S, 2D] cache, as in the decoder


def make_inputs(batch: int, kv_heads: int, groups: int, head_dim: int, slots: int, kv_len: int, dtype: torch.dtype,
                seed: int = 0):
    """q, keys, values, mask with left padding (row 0: half of kv_len, whole splits for some plans above),
    holes in the middle, a row whose only live slot is the last one, and NaN in the slots >= kv_len that
    must not be read."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, kv_heads, groups, head_dim, generator=gen).to(dtype)
    cache = torch.randn(LAYER + 1, batch, kv_heads, slots, 2 * head_dim, generator=gen).to(dtype)
    cache[:, :, :, kv_len:] = float("nan")
    mask = torch.ones(batch, slots, dtype=torch.bool)
    mask[0, : kv_len // 2] = False
    mask[1, : kv_len - 1] = False
    mask[-1, 3:9] = False
    return q, cache[LAYER, ..., :head_dim], cache[LAYER, ..., head_dim:], mask


def run_cases() -> Dict[str, float]:
    """Max abs error of the kernel vs the fp32 reference of the same inputs, per case and dtype."""
    from rlscale.engines.kernels.decode_attention import Plan, decode_attention, decode_attention_reference

    errors = {}
    for name, (batch, kv_heads, groups, head_dim, slots, kv_len, plan) in CASES.items():
        for dtype in (torch.float32, torch.bfloat16):
            q, keys, values, mask = make_inputs(batch, kv_heads, groups, head_dim, slots, kv_len, dtype)
            out = decode_attention(q, keys, values, mask, kv_len, config=Plan(**plan) if plan else None)
            assert out.dtype == dtype and out.shape == q.shape
            ref = decode_attention_reference(q.float(), keys.float(), values.float(), mask, kv_len)
            errors[f"{name}-{str(dtype).split('.')[-1]}"] = (out.float() - ref).abs().max().item()
    errors.update(own_lengths_errors())
    errors["bf16_cast_mismatches"] = bf16_cast_mismatches()
    return errors


def own_lengths_errors() -> Dict[str, float]:
    """``lengths``: rows of different lengths under one kv_len (a refilling generator's rows). Every slot at or
    past a row's length is NaN and marked live, so only the loop's end keeps it out; the left padding below it
    is NaN and dead, so only the predicated loads keep it out (a read NaN poisons p @ v). Error against the
    reference over each row's live slots below its length, NaN zeroed, for the default plan and a split one
    (where whole splits of the short rows lie past their length)."""
    from rlscale.engines.kernels.decode_attention import Plan, decode_attention, decode_attention_reference

    errors = {}
    for dtype in (torch.float32, torch.bfloat16):
        q, keys, values, _ = make_inputs(4, 2, 3, 64, 256, 250, dtype, seed=3)
        lengths = torch.tensor([250, 7, 130, 64])
        below = torch.arange(256)[None, :] < lengths[:, None]
        mask = torch.ones(4, 256, dtype=torch.bool)
        mask[2, :40] = False  # left padding
        unread = ~(mask & below)[:, None, :, None]
        ref = decode_attention_reference(q.float(), keys.float().masked_fill(unread, 0.0),
                                         values.float().masked_fill(unread, 0.0), mask & below, 250)
        keys.masked_fill_(unread, float("nan"))
        values.masked_fill_(unread, float("nan"))
        for name, plan in (("default", None), ("split3_block32", Plan(block_n=32, splits=3))):
            out = decode_attention(q, keys, values, mask, 250, config=plan, lengths=lengths)
            errors[f"own_lengths_{name}-{str(dtype).split('.')[-1]}"] = (out.float() - ref).abs().max().item()
    return errors


def bf16_cast_mismatches(n: int = 4096) -> float:
    """How many float32 -> bf16 casts inside an (interpreted) kernel differ from torch's round to nearest
    even: Triton's interpreter truncated them (about half of random values) until
    ``decode_attention._fix_interpreter_bf16``."""
    import triton
    import triton.language as tl

    import rlscale.engines.kernels.decode_attention  # noqa: F401  (applies the interpreter fixes)

    @triton.jit
    def cast_kernel(src, dst, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(dst + i, tl.load(src + i).to(tl.bfloat16))

    values = torch.randn(n, generator=torch.Generator().manual_seed(0))
    out = torch.empty(n, dtype=torch.bfloat16)
    cast_kernel[(1,)](values, out, BLOCK=n)
    return float((out != values.to(torch.bfloat16)).sum())


@pytest.fixture(scope="module")
def kernel_errors() -> Dict[str, float]:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not importable (pip install triton): the Triton kernel cannot run, not even interpreted")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_reference(kernel_errors: Dict[str, float], case: str, dtype: str):
    error = kernel_errors[f"{case}-{dtype}"]
    assert error < TOLERANCE[dtype], f"{case} {dtype}: max abs error {error}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("plan", ["default", "split3_block32"])
def test_own_lengths_read_no_slot_past_a_row_and_no_masked_one(kernel_errors: Dict[str, float], plan: str,
                                                              dtype: str):
    error = kernel_errors[f"own_lengths_{plan}-{dtype}"]
    assert error < TOLERANCE[dtype], f"own lengths {plan} {dtype}: max abs error {error}"


def test_interpreted_bf16_casts_round_to_nearest_even(kernel_errors: Dict[str, float]):
    """The kernels' interpreter runs round float32 -> bf16 as the GPU does, so the tolerances above are not
    measured against a truncating kernel."""
    assert kernel_errors["bf16_cast_mismatches"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_is_the_old_sdpa_formulation(dtype: torch.dtype):
    """The reference is the decoder's former inline SDPA call (bit for bit) and is masked attention."""
    from rlscale.engines.kernels.decode_attention import decode_attention_reference

    batch, kv_heads, groups, head_dim, slots, kv_len = 3, 2, 7, 64, 96, 77
    q, keys, values, mask = make_inputs(batch, kv_heads, groups, head_dim, slots, kv_len, dtype)
    bias = torch.zeros((batch, 1, 1, kv_len), dtype=dtype)
    bias.masked_fill_(~mask[:, None, None, :kv_len], float("-inf"))
    old = F.scaled_dot_product_attention(q, keys[:, :, :kv_len], values[:, :, :kv_len], attn_mask=bias)
    ref = decode_attention_reference(q, keys, values, mask, kv_len)
    assert torch.equal(ref, old)

    k, v = keys[:, :, :kv_len].double(), values[:, :, :kv_len].double()
    scores = torch.einsum("bhgd,bhnd->bhgn", q.double(), k) / head_dim ** 0.5
    scores = scores.masked_fill(~mask[:, None, None, :kv_len], float("-inf"))
    naive = torch.einsum("bhgn,bhnd->bhgd", scores.softmax(-1), v)
    torch.testing.assert_close(ref.double(), naive, atol=TOLERANCE[str(dtype).split(".")[-1]], rtol=0)


if __name__ == "__main__":
    print(json.dumps(run_cases()))
