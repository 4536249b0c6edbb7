"""The split-K kernel of the decode step's residual projections (rlscale.engines.splitk_linear).

The Triton kernel runs in Triton's CPU interpreter (``TRITON_INTERPRET=1`` must be set before triton is
imported, so the checks run in a subprocess). The interpreter's device has one "SM"; the script pretends
132, as on an H100, so the plans split K as they would there.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from rlscale.engines.splitk_linear import plan

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")


def test_plan_fills_the_sms_with_whole_k_blocks(monkeypatch):
    from rlscale.engines import splitk_linear
    monkeypatch.setattr(splitk_linear, "_sm_count", lambda device: 132)
    down = plan(256, 896, 4864, torch.device("cpu"))  # Qwen2-0.5B's down projection at 256 rows
    assert (down.block_m, down.block_n, down.splits, down.chunk) == (128, 64, 4, 1216)
    o_proj = plan(256, 576, 576, torch.device("cpu"))  # SmolLM2's attention output: 18 tiles, K of 9 blocks
    assert (o_proj.splits, o_proj.chunk) == (5, 128)  # 7 wanted, but chunks of >= 2 blocks: at most 5
    tiny = plan(4, 32, 64, torch.device("cpu"))
    assert (tiny.block_m, tiny.splits, tiny.chunk) == (64, 1, 64)
    for cfg, k in ((down, 4864), (o_proj, 576)):
        assert cfg.chunk % cfg.block_k == 0 and (cfg.splits - 1) * cfg.chunk < k <= cfg.splits * cfg.chunk


@needs_triton
def test_partials_sum_to_the_product_in_the_interpreter():
    script = textwrap.dedent("""
        import torch
        from rlscale.engines import splitk_linear as sk
        sk._sm_count = lambda device: 132
        torch.manual_seed(0)
        # ragged M, N and K (K not a whole number of chunks, nor of blocks), one split, many splits
        for m, n, k in [(5, 70, 200), (130, 64, 256), (3, 17, 64), (256, 96, 576), (7, 40, 1000)]:
            x, w = torch.randn(m, k).bfloat16(), torch.randn(n, k).bfloat16()
            bias = torch.randn(n).bfloat16()
            parts = sk.splitk_partials(x, w)
            cfg = sk.plan(m, n, k, x.device)
            assert parts.shape == (cfg.splits, m, n) and parts.dtype == torch.float32
            for s in range(cfg.splits):  # each split is its own K chunk
                cols = slice(s * cfg.chunk, min((s + 1) * cfg.chunk, k))
                exact = x[:, cols].double() @ w[:, cols].double().T
                assert float((parts[s].double() - exact).abs().max()) < 1e-3, (m, n, k, s)
            y = sk.residual_projection(x, w, bias, split_k=True)
            ref = torch.nn.functional.linear(x.double(), w.double(), bias.double())
            assert y.dtype == torch.bfloat16 and y.shape == (m, n)
            # one bf16 rounding of the fp32 sum: within half an ulp (2^-8 relative) plus the fp32 error
            assert bool(((y.double() - ref).abs() <= ref.abs() * 2**-8 + 1e-3).all()), (m, n, k)
            assert torch.equal(y, sk.residual_projection(x, w, bias, split_k=True))  # fixed order: same bits
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_without_split_k_it_is_f_linear():
    from rlscale.engines.splitk_linear import residual_projection
    x, w, b = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5)
    assert torch.equal(residual_projection(x, w, b, split_k=False), torch.nn.functional.linear(x, w, b))
