"""PPO-off-policy-k (Section 3.1): the k batches of a block are sampled from the policy version that
began it, one batch per update, while the learner's weights move on."""
from __future__ import annotations

import math

import pytest
import torch

from rlscale.config import compose_run_config, typed
from rlscale.train.components import build_components
from rlscale.train.offpolicy.kept_policy import KeptPolicy


def zero_weights(model: torch.nn.Module) -> None:
    """An update that makes the policy uniform over the vocabulary."""
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()


def uniform_logp(completions, vocab: int) -> bool:
    logp = torch.tensor([lp for c in completions for lp in c.gen_logp])
    return torch.allclose(logp, torch.full_like(logp, -math.log(vocab)), atol=1e-5)


def test_a_block_samples_every_batch_from_its_first_version(tmp_path):
    cfg = typed(compose_run_config(["offpolicy=ppo", "offpolicy.batches_per_version=2", "batch.prompts=3",
                                    "batch.generations=2", "engine.threads=1", f"out={tmp_path}"]))
    c = build_components(cfg, tmp_path)
    vocab = c.tok.vocab_size
    first = c.source.next_batch(0)
    zero_weights(c.model)  # the learner's update after the first batch
    second = c.source.next_batch(1)
    live = [p.detach().clone() for p in c.model.parameters()]
    third = c.source.next_batch(2)  # a new block, from the updated weights

    assert [len(b) for b in (first, second, third)] == [3, 3, 3]  # one batch generated per update
    comps = lambda groups: [x for g in groups for x in g.completions]
    assert {v for x in comps(second) for v in x.versions} == {0}
    assert not uniform_logp(comps(second), vocab)  # sampled by version 0, not by the live weights
    assert all(torch.equal(a, b) for a, b in zip(live, c.model.parameters()))  # live weights back
    assert all(not torch.any(p) for p in c.model.parameters())
    assert {v for x in comps(third) for v in x.versions} == {2}
    assert uniform_logp(comps(third), vocab)


def test_kept_weights_resume_mid_block(tmp_path):
    cfg = typed(compose_run_config(["offpolicy=ppo", "offpolicy.batches_per_version=3", "batch.prompts=2",
                                    "batch.generations=2", "engine.threads=1", f"out={tmp_path}"]))
    c = build_components(cfg, tmp_path)
    c.source.next_batch(0)
    state = c.source.state_dict()
    assert state["left"] == 2 and state["block_version"] == 0 and state["kept"] is not None
    fresh = build_components(cfg, tmp_path / "again")
    zero_weights(fresh.model)
    fresh.source.load_state_dict(state)
    with fresh.source.kept.swapped_in():
        assert all(torch.equal(a, b) for a, b in zip(fresh.model.parameters(), c.model.parameters()))
    assert all(not torch.any(p) for p in fresh.model.parameters())


def test_on_policy_keeps_no_copy_and_an_earlier_checkpoint_is_refused(tmp_path):
    cfg = typed(compose_run_config(["offpolicy=ppo", "offpolicy.batches_per_version=1", "engine.threads=1",
                                    f"out={tmp_path}"]))
    c = build_components(cfg, tmp_path)
    assert c.source.kept is None and c.source.state_dict()["kept"] is None
    with pytest.raises(ValueError, match="earlier rlscale"):
        c.source.load_state_dict({"buffer": []})


def test_swapping_keeps_the_parameter_tensors():
    model = torch.nn.Linear(3, 2)
    kept = KeptPolicy(model)
    kept.keep()
    before = [p.data.data_ptr() for p in model.parameters()]
    saved = [p.detach().clone() for p in model.parameters()]
    zero_weights(model)
    with kept.swapped_in():
        assert all(torch.equal(p, s) for p, s in zip(model.parameters(), saved))
    assert [p.data.data_ptr() for p in model.parameters()] == before
    assert all(not torch.any(p) for p in model.parameters())
