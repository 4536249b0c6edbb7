"""In-flight weight updates (PipelineRL, Section 3.1), in one process and deterministic: a publication
between decode steps switches the generator's weights mid-sequence, the KV cache is kept, every token
records the version that sampled it, and the tokens after the switch follow the new policy."""
from __future__ import annotations

import copy
import math

import torch
import torch.multiprocessing as mp

from rlscale.config.schema import GenerationConfig, LengthConfig, ModelConfig
from rlscale.engines.char_tokenizer import CharTokenizer
from rlscale.engines.tiny_model import build_tiny_llama
from rlscale.engines.torch_generator import TorchGenerator
from rlscale.train.pipeline_weights import PolicyReplica, SharedWeights

SWITCH = 5  # the update lands before decode step SWITCH (1-based): tokens 0..SWITCH-2 are version 0


def no_peer() -> None:
    """Liveness check of a peer that cannot die (everything is in this process)."""


def uniform_policy(model: torch.nn.Module) -> torch.nn.Module:
    """The same network with a zero LM head: every token has log-probability -log(V)."""
    out = copy.deepcopy(model)
    out.lm_head.weight.data.zero_()
    return out


def test_update_between_decode_steps_switches_weights_mid_sequence():
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(ModelConfig(), tok.vocab_size).eval()
    shared = SharedWeights(model, mp.get_context("forkserver"))
    shared.publish(model, 0, no_peer)
    replica = PolicyReplica(shared, torch.device("cpu"))
    new_policy = uniform_policy(model)
    calls = []

    def version_hook() -> int:
        calls.append(1)
        if len(calls) == SWITCH:
            shared.publish(new_policy, 1, no_peer)
        return replica.refresh(no_peer)

    prompts = [tok.encode_prompt("3+4+5")] * 6
    engine = TorchGenerator(replica.model, tok, GenerationConfig(), LengthConfig(), True, torch.device("cpu"))
    out = engine.generate(prompts, torch.Generator().manual_seed(1), version=replica.refresh(no_peer),
                          version_hook=version_hook)
    fixed = TorchGenerator(copy.deepcopy(model).eval(), tok, GenerationConfig(), LengthConfig(), True,
                           torch.device("cpu")).generate(prompts, torch.Generator().manual_seed(1))

    uniform_logp = -math.log(tok.vocab_size)
    for c in out:
        assert c.versions == [0 if t < SWITCH - 1 else 1 for t in range(len(c.tokens))]
    long = [(c, ref) for c, ref in zip(out, fixed) if len(c.tokens) > SWITCH]
    assert long
    for c, ref in long:
        logp = torch.tensor(c.gen_logp)
        assert not torch.allclose(logp[:SWITCH - 1], torch.full((SWITCH - 1,), uniform_logp))
        assert torch.allclose(logp[SWITCH - 1:], torch.full_like(logp[SWITCH - 1:], uniform_logp), atol=1e-5)
        assert c.tokens[:SWITCH - 1] == ref.tokens[:SWITCH - 1]  # same draws before the update
        assert c.prompt_ids == ref.prompt_ids  # the sequence continued, it was not restarted
    assert any(c.tokens[SWITCH - 1:] != ref.tokens[SWITCH - 1:len(c.tokens)] for c, ref in long)
    assert replica.version == 1 and replica.load_seconds > 0


def test_publish_and_refresh_copy_exact_weights():
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(ModelConfig(), tok.vocab_size).eval()
    shared = SharedWeights(model, mp.get_context("forkserver"))
    replica = PolicyReplica(shared, torch.device("cpu"))
    assert replica.refresh(no_peer) == -1  # nothing published yet
    trained = copy.deepcopy(model)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    assert shared.publish(trained, 7, no_peer) >= 0
    assert replica.refresh(no_peer) == 7
    for a, b in zip(replica.model.state_dict().values(), trained.state_dict().values()):
        assert torch.equal(a, b)
