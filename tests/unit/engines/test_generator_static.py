"""The GPU path of the torch generator, run on CPU without graphs (the same step code the graphs capture):
the static-KV-cache decoder reproduces HF's forward (Llama, Qwen2 with biases, Qwen3 with q/k norms,
grouped-query attention, left padding); its completions carry the generator log-probabilities that HF
assigns to the same tokens (temperature included); the Gumbel-max sampler draws from softmax(logits/T)
and is reproducible; an in-flight weight update switches the policy mid-sequence (PipelineRL, Section
3.1); reusing a bucket gives the same completions as a fresh one."""
from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.engines.generators.graph_decode import GraphDecoder, batch_bucket, record_step
from rlscale.engines.generators.phases import PhaseRules
from rlscale.engines.generators.static_decoder import StaticKVDecoder, supports
from rlscale.engines.kernels.gumbel import gumbel_sample, uniforms, unit_interval
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.policy import token_logprobs
from rlscale.engines.models.tiny_model import build_tiny_llama

SHAPE = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=48, max_position_embeddings=64)
FAMILIES = [(LlamaForCausalLM, LlamaConfig), (Qwen2ForCausalLM, Qwen2Config), (Qwen3ForCausalLM, Qwen3Config)]


def random_model(cls, config_cls, seed: int = 0, **shape_overrides):
    torch.manual_seed(seed)
    model = cls(config_cls(**{**SHAPE, **shape_overrides})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


@pytest.mark.parametrize("cls,config_cls", FAMILIES)
def test_decoder_matches_the_hf_forward_over_prefill_and_decode(cls, config_cls):
    model = random_model(cls, config_cls)
    assert supports(model)
    assert_decoder_matches_hf(model, StaticKVDecoder(model, fp32_head=True))


def test_compiled_decoder_writes_the_cache_in_its_graphs_and_matches_hf():
    """torch.compile of the prefill and the decode step (the GPU default; inductor's C++ backend here): the
    cache writes inside the compiled graphs land in the right slot of the right layer, and every layer
    reuses one graph per piece."""
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    model = random_model(Qwen2ForCausalLM, Qwen2Config, num_hidden_layers=3)
    assert_decoder_matches_hf(model, StaticKVDecoder(model, fp32_head=True, compiled=True))
    # decode: first query, layer-to-layer, last layer; prefill (dynamic shapes): q/k/v, layer output
    assert counters["stats"]["unique_graphs"] == 5
    assert not counters["recompiles"]


def assert_decoder_matches_hf(model, dec: StaticKVDecoder) -> None:
    prompts = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10]]
    width = 5
    ids = torch.zeros(3, width, dtype=torch.long)
    attn = torch.zeros(3, width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], attn[i, width - len(p):] = torch.tensor(p), 1
    cache = dec.new_cache(3, 16)
    hidden, pos = dec.prefill(cache, ids, attn)
    gen = torch.Generator().manual_seed(1)
    for step in range(5):
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        ref = model(input_ids=ids, attention_mask=attn, position_ids=positions).logits[:, -1]
        assert torch.allclose(dec.logits(hidden), ref, atol=1e-5), step
        token = torch.randint(0, 50, (3,), generator=gen)
        ids, attn = torch.cat([ids, token[:, None]], 1), torch.cat([attn, torch.ones(3, 1, dtype=torch.long)], 1)
        hidden = dec.decode(cache, token, pos, torch.tensor([width + step]), 16 if step % 2 else 8 + step)
        pos = pos + 1


def tiny_char_policy() -> tuple[CharTokenizer, torch.nn.Module]:
    """The embedded default's tokenizer and tiny Llama, seeded 0."""
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    return tok, build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()


def char_rules(tok: CharTokenizer, interruption: bool = True) -> PhaseRules:
    return PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=tok.think_close_ids,
                      interrupt_ids=tok.interrupt_ids, max_answer=6, interruption=interruption)


def test_completions_carry_the_hf_log_probabilities_of_their_tokens():
    tok, model = tiny_char_policy()
    temperature = 0.7
    engine = GraphDecoder(model, char_rules(tok), fp32_head=True, temperature=temperature, max_budget=12)
    prompts = [tok.encode_prompt(q) for q in ("1+2", "33+4+5", "7")] * 2
    out, steps = engine.generate(prompts, torch.tensor([4, 12, 6, 9, 12, 5]), seed=11, version=3,
                                 version_hook=None, decode=tok.decode)
    assert steps == max(len(c.tokens) for c in out)
    assert any(c.interrupted for c in out)
    for c in out:
        ids = torch.tensor([c.prompt_ids + c.tokens])
        ref = token_logprobs(model, ids, True, temperature).logp[0, len(c.prompt_ids) - 1:]
        assert torch.allclose(torch.tensor(c.gen_logp), ref, atol=1e-4)
        assert c.versions == [3] * len(c.tokens)
        if c.interrupted:
            at = c.think_tokens
            assert c.tokens[at:at + len(tok.interrupt_ids)] == tok.interrupt_ids
            assert not any(c.sampled[at:at + len(tok.interrupt_ids)])


def test_gumbel_max_draws_follow_the_softmax_and_repeat_with_the_seed():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]]).repeat(20000, 1)
    draw, lse = gumbel_sample(logits, 0.5, torch.tensor([7]))
    freq = torch.bincount(draw, minlength=5).float() / len(draw)
    assert torch.allclose(freq, torch.softmax(logits[0] * 0.5, -1), atol=0.01)  # inverse temperature 0.5
    assert torch.allclose(lse, torch.logsumexp(logits * 0.5, -1))
    assert torch.equal(draw, gumbel_sample(logits, 0.5, torch.tensor([7]))[0])
    assert not torch.equal(draw, gumbel_sample(logits, 0.5, torch.tensor([8]))[0])
    u = uniforms(torch.tensor([3]), 100, 1000)
    assert 0 < float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.01
    extremes = unit_interval(torch.tensor([0, 2**23 - 1]))  # the largest hash must not round to u = 1 (inf noise)
    assert extremes.tolist() == [2.0**-24, 1 - 2.0**-24]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_triton_kernel_matches_the_torch_sampler_in_the_interpreter():
    script = textwrap.dedent("""
        import torch
        import triton
        import triton.language as tl
        from triton.language.extra import libdevice
        from rlscale.engines.kernels import gumbel
        gumbel.GUMBEL_CHUNK = 2048  # several chunks per row at these widths
        # the GPU path (FAST_LOG: the series of -log(u) near u = 1) with tl.log standing in for the hardware
        # log, which the interpreter lacks; then the accurate path
        libdevice.fast_logf = lambda x: tl.log(x)

        @triton.jit
        def noise_kernel(u_ptr, out_ptr, N: tl.constexpr):
            i = tl.arange(0, N)
            tl.store(out_ptr + i, gumbel._gumbel_noise(tl.load(u_ptr + i), True))

        bits = torch.cat([torch.arange(2**23 - 4096, 2**23), torch.randint(0, 2**23, (4096,))])  # u near 1: the series
        u = gumbel.unit_interval(bits)
        noise = torch.empty_like(u)
        noise_kernel[(1,)](u, noise, N=len(u))
        exact = -torch.log(-torch.log(u.double()))
        assert float((noise.double() - exact).abs().max()) < 2e-6, float((noise.double() - exact).abs().max())
        for fast in (True, False):
            gumbel.FAST_LOG = fast
            torch.manual_seed(0)
            for rows, cols in [(5, 3000), (3, 17), (4, 4096), (3, 9000), (2, 20000)]:
                logits = torch.randn(rows, cols) * 3
                logits[0, 5000 % cols] = logits[0, 8500 % cols] = 40.0  # two dominant columns, two chunks
                logits[-1, :2100] = float("-inf")  # a masked first chunk
                seed = torch.tensor([123456789012])
                draw, lse = gumbel.gumbel_sample_triton(logits, 0.7, seed)
                ref_draw, ref_lse = gumbel.gumbel_sample_torch(logits, 0.7, seed)
                assert torch.equal(draw, ref_draw) and torch.allclose(lse, ref_lse), (fast, draw, ref_draw)
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_in_flight_update_switches_the_policy_mid_sequence():
    tok, model = tiny_char_policy()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    # bf16 head: the decoder reads its own copy of the head, which only ``refresh`` updates
    engine = GraphDecoder(model, char_rules(tok), fp32_head=False, temperature=1.0, max_budget=20)
    calls = []

    def hook() -> int:
        calls.append(1)
        if len(calls) == 4:  # the update lands before step 4 (0-based 3): a zero head, uniform policy
            model.lm_head.weight.data.zero_()
        return 0 if len(calls) < 4 else 1

    prompts = [tok.encode_prompt("3+4+5")] * 5
    out, _ = engine.generate(prompts, torch.full((5,), 20), seed=5, version=0, version_hook=hook,
                             decode=tok.decode)
    for c in out:
        assert c.versions == [0 if t < 3 else 1 for t in range(len(c.tokens))]
        logp = torch.tensor(c.gen_logp)
        assert torch.allclose(logp[3:], torch.full_like(logp[3:], -math.log(tok.vocab_size)), atol=1e-5)
        assert not torch.allclose(logp[:3], torch.full((3,), -math.log(tok.vocab_size)), atol=1e-3)
    model.load_state_dict(saved)
    again, _ = engine.generate(prompts, torch.full((5,), 20), seed=5, version=0, version_hook=None, decode=tok.decode)
    assert [c.tokens[:3] for c in again] == [c.tokens[:3] for c in out]  # refreshed at the start of generate


def test_a_reused_bucket_gives_the_completions_of_a_fresh_one():
    tok, model = tiny_char_policy()
    prompts = [tok.encode_prompt(q) for q in ("12+3", "4", "5+5+5+5")]
    budgets = torch.tensor([6, 9, 3])

    def fresh():
        return GraphDecoder(model, char_rules(tok, interruption=False), True, 1.0, max_budget=10)

    used = fresh()
    used.generate([tok.encode_prompt("999+999+999")] * 7, torch.full((7,), 10), 1, 0, None, tok.decode)
    assert len(used.buckets) == 1 and batch_bucket(3) == batch_bucket(7)
    first, _ = used.generate(prompts, budgets, 2, 0, None, tok.decode)
    second, _ = fresh().generate(prompts, budgets, 2, 0, None, tok.decode)
    assert [c.__dict__ for c in first] == [c.__dict__ for c in second]
    assert all(c.truncated == (c.tokens[-1] != tok.eos_id) for c in first)


@pytest.mark.parametrize("interruption", [True, False])
def test_the_compiled_step_record_gives_the_completions_of_the_eager_one(interruption):
    """``record_step`` (choice of the token, its log-probability, the phase update) compiled as on GPU (by
    inductor's C++ backend here): the same tokens, log-probabilities, interruptions or truncations, lengths."""
    tok, model = tiny_char_policy()
    prompts = [tok.encode_prompt(q) for q in ("12+3", "4", "5+5+5+5", "9+9", "1", "2+2+2")]
    budgets = torch.tensor([6, 9, 3, 12, 7, 10])

    def completions(compiled: bool):
        engine = GraphDecoder(model, char_rules(tok, interruption), True, 0.8, max_budget=12)
        if compiled:
            torch._dynamo.reset()
            engine.record = torch.compile(record_step, fullgraph=True)
        return engine.generate(prompts, budgets, 4, 0, None, tok.decode)[0]

    eager, compiled = completions(False), completions(True)
    ended_at_budget = [c.interrupted if interruption else c.truncated for c in eager]
    assert any(ended_at_budget) and not all(ended_at_budget)
    assert [c.__dict__ for c in compiled] == [c.__dict__ for c in eager]
