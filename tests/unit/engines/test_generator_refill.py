"""The refilling GPU path of the torch generator (``graph_decode.RefillBucket``: R rows, each refilled with the
call's next pending prompt when its trace ends), run on CPU without graphs and with the reference attention
(the step code the graphs capture): its completions keep the invariants of the static path (Section 3.2
length control: lengths within the budgets, the interruption phrase exactly at the budget, the answer cap;
the generator log-probabilities of the sampled tokens, at temperature T; the policy version of every token
under an in-flight update, Section 3.1), come back in the order of the prompts with every group whole, and
with R at least the call's bucket of rows they are those of the static path."""
from __future__ import annotations

import math

import pytest
import torch

from rlscale.core.types import Completion
from rlscale.engines.generators.graph_decode import CHECK_EVERY, GraphDecoder, RefillBucket, batch_bucket
from rlscale.engines.generators.phases import PhaseRules
from rlscale.engines.models.policy import token_logprobs
from tests.unit.engines.test_generator_static import char_rules, tiny_char_policy

QUESTIONS = ("1+2", "33+4+5", "7", "12+3", "4", "5+5+5+5")
GENERATIONS = 3
MAX_BUDGET = 12


def grouped_prompts(tok) -> list:
    """GENERATIONS completions of each question, a group's prompts side by side (as the sampler asks)."""
    return [tok.encode_prompt(q) for q in QUESTIONS for _ in range(GENERATIONS)]


def budgets_of(n: int) -> torch.Tensor:
    return torch.randint(2, MAX_BUDGET + 1, (n,), generator=torch.Generator().manual_seed(0))


def sample(model, rules: PhaseRules, rows: int, prompts, budgets, temperature: float = 0.8, hook=None,
           fp32_head: bool = True) -> tuple[list, int, GraphDecoder]:
    engine = GraphDecoder(model, rules, fp32_head, temperature, max_budget=MAX_BUDGET, rows=rows)
    out, steps = engine.generate(prompts, budgets, seed=4, version=0, version_hook=hook, decode=lambda ids: "")
    return out, steps, engine


def assert_phases(c: Completion, budget: int, rules: PhaseRules) -> None:
    """Section 3.2 on one completion: the think budget, the phrase forced exactly where it runs out (not
    sampled), the answer cap, and the end (EOS, or truncation at a cap)."""
    phrase = rules.interrupt_ids
    assert c.think_tokens <= budget and len(c.tokens) <= rules.max_steps(budget)
    if c.interrupted:
        assert c.think_tokens == budget
        assert c.tokens[budget:budget + len(phrase)] == phrase
        assert c.sampled == [True] * budget + [False] * len(phrase) + [True] * (len(c.tokens) - budget - len(phrase))
        answer = len(c.tokens) - budget - len(phrase)
    else:
        assert all(c.sampled)
        closed = c.tokens[c.think_tokens:c.think_tokens + len(rules.think_close_ids)] == rules.think_close_ids
        answer = len(c.tokens) - c.think_tokens - len(rules.think_close_ids) if closed else 0
    assert answer <= rules.max_answer
    assert c.truncated == (c.tokens[-1] != rules.eos_id)


@pytest.mark.parametrize("interruption", [True, False])
@pytest.mark.parametrize("rows", [3, 5])
def test_refilled_rows_keep_the_length_control_and_the_log_probabilities_of_every_completion(interruption, rows):
    tok, model = tiny_char_policy()
    rules = char_rules(tok, interruption)
    prompts, temperature = grouped_prompts(tok), 0.8
    budgets = budgets_of(len(prompts))
    out, steps, engine = sample(model, rules, rows, prompts, budgets, temperature)
    bucket = next(iter(engine.buckets.values()))
    assert isinstance(bucket, RefillBucket) and bucket.rows == rows
    assert [c.prompt_ids for c in out] == prompts  # in the order of the prompts: every group whole, together
    ended_at_budget = [c.interrupted if interruption else c.truncated and c.think_tokens == b
                       for c, b in zip(out, budgets.tolist())]
    assert any(ended_at_budget) and not all(ended_at_budget)
    for c, budget in zip(out, budgets.tolist()):
        assert_phases(c, budget, rules)
        assert c.versions == [0] * len(c.tokens)
        ids = torch.tensor([c.prompt_ids + c.tokens])
        ref = token_logprobs(model, ids, True, temperature).logp[0, len(c.prompt_ids) - 1:]
        assert torch.allclose(torch.tensor(c.gen_logp), ref, atol=1e-4)
    # the refilled rows start later than step 0, and no row waits longer than a check for its next prompt
    assert max(len(c.tokens) for c in out) < steps < sum(len(c.tokens) + CHECK_EVERY for c in out) / 2


@pytest.mark.parametrize("interruption", [True, False])
def test_with_the_calls_rows_the_refilling_path_is_the_static_one(interruption):
    """R >= the call's bucket of rows (batch_bucket(18) = 32): every completion starts at decode step 0 in the
    row the static path gives it, with the same left padding, draws and cache contents, so the completions
    are equal field by field (tokens, log-probabilities bit for bit, sampled flags, versions, interruption,
    truncation, think length) and so is the count of decode steps."""
    tok, model = tiny_char_policy()
    rules = char_rules(tok, interruption)
    prompts = grouped_prompts(tok)
    budgets = budgets_of(len(prompts))
    static, static_steps, _ = sample(model, rules, 0, prompts, budgets)
    for rows in (batch_bucket(len(prompts)), 100):
        refill, refill_steps, engine = sample(model, rules, rows, prompts, budgets)
        assert isinstance(next(iter(engine.buckets.values())), RefillBucket)
        assert [c.__dict__ for c in refill] == [c.__dict__ for c in static]
        assert refill_steps == static_steps


def test_an_in_flight_update_versions_every_token_of_the_refilled_rows():
    """The update lands before decode step 6 (PipelineRL, Section 3.1): a zero head, the uniform policy. Every
    token sampled before it carries version 0 and the old policy's log-probability, every later one version 1
    and log(1/V); the completions refilled after the update are all of version 1."""
    tok, model = tiny_char_policy()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    old = tiny_char_policy()[1]
    calls = []

    def hook() -> int:
        calls.append(1)
        if len(calls) == 7:
            model.lm_head.weight.data.zero_()
        return 0 if len(calls) < 7 else 1

    prompts = grouped_prompts(tok)
    out, _, _ = sample(model, char_rules(tok), 4, prompts, budgets_of(len(prompts)), temperature=1.0, hook=hook,
                       fp32_head=False)  # bf16 head: the decoder's own copy, which only ``refresh`` updates
    uniform = -math.log(tok.vocab_size)
    for c in out:
        switch = c.versions.index(1) if 1 in c.versions else len(c.versions)
        assert c.versions == [0] * switch + [1] * (len(c.versions) - switch)
        logp = torch.tensor(c.gen_logp)
        assert torch.allclose(logp[switch:], torch.full_like(logp[switch:], uniform), atol=1e-5)
        if switch:
            ids = torch.tensor([c.prompt_ids + c.tokens])
            ref = token_logprobs(old, ids, False, 1.0).logp[0, len(c.prompt_ids) - 1:]
            assert torch.allclose(logp[:switch], ref[:switch], atol=1e-2)  # bf16 head
    assert sum(c.versions[0] == 1 for c in out) >= len(out) - 4 - 4  # all but the first fills and a check's
    assert any(c.versions[0] == 0 and c.versions[-1] == 1 for c in out)
    model.load_state_dict(saved)


def test_a_reused_refill_bucket_gives_the_completions_of_a_fresh_one():
    tok, model = tiny_char_policy()
    rules = char_rules(tok)
    prompts = grouped_prompts(tok)
    budgets = budgets_of(len(prompts))
    engine = GraphDecoder(model, rules, True, 0.8, max_budget=MAX_BUDGET, rows=4)
    engine.generate([tok.encode_prompt("999+999+999")] * 9, torch.full((9,), MAX_BUDGET), 1, 0, None, str)
    first = engine.generate(prompts, budgets, 4, 0, None, str)[0]
    fresh = GraphDecoder(model, rules, True, 0.8, max_budget=MAX_BUDGET, rows=4).generate(prompts, budgets, 4, 0,
                                                                                          None, str)[0]
    assert len(engine.buckets) == 1 and [c.__dict__ for c in first] == [c.__dict__ for c in fresh]


@pytest.mark.parametrize("compiled", [False, True])
def test_rows_at_their_own_slots_match_the_hf_forward_of_their_own_sequences(compiled):
    """The decoder with per-row slots (an indexed store into the cache; compiled as on GPU, by inductor's C++
    backend here): three rows at different lengths, the second refilled with a new prompt after two steps
    while the others go on, each row's logits those of HF's forward of that row's own tokens."""
    from tests.unit.engines.test_generator_static import FAMILIES, random_model
    from rlscale.engines.generators.static_decoder import StaticKVDecoder

    torch._dynamo.reset()
    cls, config_cls = FAMILIES[2]  # Qwen3: q/k norms
    model = random_model(cls, config_cls)
    dec = StaticKVDecoder(model, fp32_head=True, compiled=compiled)
    cache = dec.new_cache(3, 24)
    seqs = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10]]
    ids, attn = torch.tensor([[1, 2, 3, 4, 5], [0, 0, 0, 6, 7], [0, 0, 8, 9, 10]]), torch.tensor(
        [[1] * 5, [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]])
    hidden, pos = dec.prefill(cache, ids, attn)
    slot = torch.full((3,), 5)
    gen = torch.Generator().manual_seed(1)
    for step in range(5):
        if step == 2:  # row 1 takes a new prompt of 4 tokens into slots 0..3
            seqs[1] = [11, 12, 13, 14]
            h, p = dec.prefill(cache, torch.tensor([seqs[1]]), torch.ones(1, 4, dtype=torch.long),
                               rows=torch.tensor([1]))
            hidden[1], pos[1], slot[1] = h[0], p[0], 4
        for row, seq in enumerate(seqs):
            ref = model(input_ids=torch.tensor([seq])).logits[0, -1]
            assert torch.allclose(dec.logits(hidden)[row], ref, atol=1e-5), (step, row)
        token = torch.randint(0, 50, (3,), generator=gen)
        for row in range(3):
            seqs[row].append(int(token[row]))
        hidden = dec.decode(cache, token, pos, slot.clone(), 16)
        pos, slot = pos + 1, slot + 1


def test_no_live_slot_of_a_refilled_row_lies_past_the_length_its_attention_reads():
    """On CUDA the attention kernel ends row b's loop at lengths[b] = its slot + 1 (``decode_attention``'s
    ``lengths``), so no live slot may lie at or past it. Over a whole refilling call (rows refilled, rows ended
    and decoding padding until the next check, rows left idle at the end) the decoder's attention is checked at
    every layer and step: no row's mask is True from its length on, and no length exceeds the attended kv_len."""
    from rlscale.engines.kernels.decode_attention import decode_attention_reference

    tok, model = tiny_char_policy()
    prompts = grouped_prompts(tok)
    engine = GraphDecoder(model, char_rules(tok), True, 0.8, max_budget=MAX_BUDGET, rows=3)
    shortest = []

    def checked(q, keys, values, mask, kv_len, lengths=None):
        assert lengths is not None and bool((lengths <= kv_len).all())
        assert not (mask & (torch.arange(mask.shape[1])[None, :] >= lengths[:, None])).any()
        shortest.append(int(lengths.min()))
        return decode_attention_reference(q, keys, values, mask, kv_len)

    engine.decoder.attend = checked
    out, _ = engine.generate(prompts, budgets_of(len(prompts)), seed=4, version=0, version_hook=None,
                             decode=lambda ids: "")
    assert len(out) == len(prompts)
    assert min(shortest) == 1  # idle rows (no prompt left) attend to their one fresh slot


def test_the_compiled_per_row_cache_write_stores_in_place():
    """Compiled (inductor's C++ backend here, its GPU backend in the generator), the refilled rows' cache write
    stores each row's key/value at its own slot and allocates nothing the size of the cache: no copy of the
    layer's cache and copy back, which a ``scatter_`` compiled into at every layer and step."""
    from rlscale.engines.generators.static_decoder import write_slot
    from rlscale.testing.cpu_memory import peak_cpu_bytes

    torch._dynamo.reset()
    kv = torch.zeros(2, 4, 2, 2048, 16)  # [layers, rows, kv heads, slots, 2 x head_dim]: 1 MiB a layer
    write = torch.compile(write_slot, fullgraph=True)
    write(kv[0], torch.tensor([0, 1, 2, 3]), torch.ones(4, 2, 16))  # compiles
    slot, new = torch.tensor([3, 2047, 0, 9]), torch.randn(4, 2, 16)
    _, peak = peak_cpu_bytes(lambda: write(kv[1], slot, new))
    assert peak < kv[1].numel() * kv.element_size() / 16
    assert torch.equal(kv[1][torch.arange(4), :, slot], new)
    assert int((kv[1] != 0).sum()) == new.numel() and int((kv[0] != 0).sum()) == 4 * 2 * 16


def test_the_setting_is_validated_and_read_as_configured_off_cuda():
    from rlscale.config import ConfigError, compose_run_config, typed
    from rlscale.train.components import generator_settings, resolved_generator_rows

    for bad in ("-1", "many", "true"):
        with pytest.raises(ConfigError, match="field 'engine.generator_rows': must be a count >= 0 or auto, got"):
            compose_run_config([f"engine.generator_rows={bad}"])
    model = tiny_char_policy()[1]
    for setting, rows in (("auto", 0), ("16", 16), ("0", 0)):
        cfg = typed(compose_run_config([f"engine.generator_rows={setting}"]))
        assert resolved_generator_rows(cfg, None, None, model, torch.device("cpu")) == rows  # no prompt read off CUDA
        assert generator_settings(cfg).rows == rows and generator_settings(cfg, 8).rows == 8
