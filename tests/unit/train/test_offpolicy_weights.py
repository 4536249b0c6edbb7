"""In-flight weight updates (PipelineRL, Section 3.1), in one process and deterministic: a publication
between decode steps switches the generator's weights mid-sequence, the KV cache is kept, every token
records the version that sampled it, and the tokens after the switch follow the new policy. Scheduled
updates load the version their schedule names, wait for it, and stop at the consuming step's version."""
from __future__ import annotations

import copy
import math
import threading
import time

import pytest
import torch
import torch.multiprocessing as mp

from rlscale.config.schema import GenerationConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.rl.length import LengthConfig
from rlscale.engines.generators.torch_generator import TorchGenerator
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.train.offpolicy.pipeline_weights import PolicyReplica, ScheduledVersions, SharedWeights

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
    model = build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()
    shared = SharedWeights(model, mp.get_context("forkserver"))
    shared.publish(model.state_dict(), 0, no_peer)
    replica = PolicyReplica(shared, torch.device("cpu"))
    new_policy = uniform_policy(model)
    calls = []

    def version_hook() -> int:
        calls.append(1)
        if len(calls) == SWITCH:
            shared.publish(new_policy.state_dict(), 1, no_peer)
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
    model = build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()
    shared = SharedWeights(model, mp.get_context("forkserver"))
    replica = PolicyReplica(shared, torch.device("cpu"))
    assert replica.refresh(no_peer) == -1  # nothing published yet
    trained = copy.deepcopy(model)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    assert shared.publish(trained.state_dict(), 7, no_peer) >= 0
    assert replica.refresh(no_peer) == 7
    for a, b in zip(replica.model.state_dict().values(), trained.state_dict().values()):
        assert torch.equal(a, b)


def policy_of_version(model: torch.nn.Module, version: int) -> torch.nn.Module:
    """``model`` with its LM head filled with ``version`` (which version a replica holds, readable)."""
    out = copy.deepcopy(model)
    out.lm_head.weight.data.fill_(float(version))
    return out


def later(seconds: float, action) -> None:
    threading.Timer(seconds, action).start()


def test_scheduled_versions_wait_for_their_version_and_stop_at_the_consuming_step():
    tok = CharTokenizer(LengthConfig().phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval()
    shared = SharedWeights(model, mp.get_context("forkserver"), slots=3)  # k = 2
    replica = PolicyReplica(shared, torch.device("cpu"))
    for v in range(3):
        shared.publish(policy_of_version(model, v).state_dict(), v, no_peer)
    chunk = ScheduledVersions(replica, issued=1, position=8, every=2, check=no_peer)

    def held() -> float:
        return replica.model.lm_head.weight[0, 0].item()

    assert chunk.prefill() == 1 and held() == 1.0
    assert [chunk() for _ in range(4)] == [1, 1, 2, 2] and held() == 2.0  # one version per 2 tokens
    # step 4 wants version 3, not published yet: it waits for the publication, not for a newer version
    later(0.3, lambda: shared.publish(policy_of_version(model, 3).state_dict(), 3, no_peer))
    start = time.monotonic()
    assert chunk() == 3 and held() == 3.0 and time.monotonic() - start >= 0.25
    assert chunk() == 3
    # step 6 wants version 4; the trainer, at version 3, turns out to need this chunk (stream position 8 < 12)
    # for its step, so version 4 cannot come before the chunk: the chunk goes on with version 3
    shared.set_need(3, 8, no_peer)  # positions < 8 needed: not this chunk yet
    later(0.3, lambda: shared.set_need(3, 12, no_peer))
    start = time.monotonic()
    assert chunk() == 3 and time.monotonic() - start >= 0.25
    assert [chunk() for _ in range(4)] == [3, 3, 3, 3] and held() == 3.0
    # version 1's slot now holds version 4: a chunk still wanting 1 fails loudly instead of sampling 4
    shared.publish(policy_of_version(model, 4).state_dict(), 4, no_peer)
    with pytest.raises(RuntimeError, match="policy version 1 is no longer published"):
        ScheduledVersions(replica, issued=1, position=0, every=2, check=no_peer).prefill()
