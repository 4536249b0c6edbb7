"""PipelineRL-k with real generator processes (Section 3.1): an update published while a generator
process is decoding lands mid-sequence and changes what it samples next, its decode steps counted as they
run; with a slow trainer the
generators run exactly k batches ahead and no further."""
from __future__ import annotations

import copy
import math
import time
from typing import List

import pytest
import torch

from rlscale.config import compose_run_config, typed
from rlscale.config.schema import RunConfig
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.train.components import generator_settings
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.engines.models.tiny_model import build_tiny_llama
from rlscale.train.components import build_components
from rlscale.train.offpolicy.pipeline import split_cpu_threads
from rlscale.train.offpolicy.pipeline_workers import ChunkRequest, GeneratorPool, GeneratorSpec, generator_devices
from waiting import wait_for

DEADLINE_S = 120.0



@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")])])
def test_update_lands_mid_sequence_in_a_generator_process(tmp_path, device):
    cfg = RunConfig()
    cfg.offpolicy.update_every_tokens = 0  # immediate updates: the generator takes version 1 at its next step
    cfg.length.window = [100, 120]  # long traces: the update arrives while they are being decoded
    tok = CharTokenizer(cfg.length.phrase)
    torch.manual_seed(0)
    model = build_tiny_llama(TinyModelConfig(), tok.vocab_size).eval().to(device)
    new_policy = copy.deepcopy(model)
    new_policy.lm_head.weight.data.zero_()  # uniform sampling: log-probability -log(V) for every token
    devices = generator_devices(torch.device(device), 1)  # CUDA: the next GPU (weights through CUDA IPC)
    spec = GeneratorSpec(generator_settings(cfg), cfg.offpolicy.update_every_tokens, tok, generations=4, threads=1)
    pool = GeneratorPool(spec, devices, model, cfg.offpolicy.slots, queue_size=1, log_dir=tmp_path)
    try:
        pool.publish(model.state_dict(), 0)
        pool.submit(ChunkRequest(0, [tok.encode_prompt("3+4+5")] * 2, seed=1))
        wait_for(lambda: pool.status.busy_seconds() > 0, "the generator to take the chunk")
        busy_from = time.monotonic()
        wait_for(lambda: pool.status.heartbeat_age(0) < time.monotonic() - busy_from, "a decode step")
        pool.publish(new_policy.state_dict(), 1)
        result = None
        deadline = time.monotonic() + DEADLINE_S
        while result is None and time.monotonic() < deadline:
            result = pool.receive(0.5)
        steps = pool.status.decode_steps()
    finally:
        pool.close()
    assert result is not None and result.position == 0 and len(result.completions) == 8
    assert steps >= max(len(c.tokens) for c in result.completions)  # counted while the chunk ran, one per step
    uniform = -math.log(tok.vocab_size)
    mixed = [c for c in result.completions if set(c.versions) == {0, 1}]
    assert mixed, "no sequence carries two policy versions"
    for c in mixed:
        switch = c.versions.index(1)
        assert c.versions == [0] * switch + [1] * (len(c.tokens) - switch)
        before, after = torch.tensor(c.gen_logp[:switch]), torch.tensor(c.gen_logp[switch:])
        assert not torch.allclose(before, torch.full_like(before, uniform))
        assert torch.allclose(after, torch.full_like(after, uniform), atol=1e-5)


def test_generators_run_at_most_k_batches_ahead_of_a_slow_trainer(tmp_path):
    k = 2
    cfg = typed(compose_run_config(["offpolicy=pipeline", f"offpolicy.max_lag={k}", "batch.prompts=2",
                                    "batch.generations=2", "engine.threads=1", "offpolicy.update_every_tokens=0",
                                    f"out={tmp_path}"]))  # immediate
    comps = build_components(cfg, tmp_path)
    lags: List[int] = []
    try:
        for version in range(5):
            groups = comps.source.next_batch(version)
            sampled = [v for g in groups for c in g.completions for v in c.versions]
            assert max(sampled) <= version
            lags.append(version - min(sampled))
            time.sleep(1.5)  # a slow update: the generators fill the window meanwhile
            comps.source.after_update(comps.model, version + 1)
        metrics = comps.source.metrics()
    finally:
        comps.source.close()
    assert lags == [0, 1, 2, 2, 2]
    assert metrics["queue_depth"] == 2  # the chunks of k batches were waiting when the last one was asked for
    assert metrics["generator_idle_frac"] > 0.5  # the generators waited for the trainer


@pytest.mark.parametrize("budget,generators,share", [(2, 1, 1), (4, 1, 2), (8, 3, 2), (1, 1, 1), (3, 4, 1)])
def test_cpu_thread_budget_is_shared_between_trainer_and_generators(budget, generators, share):
    """On 2 cores the default used to start a 2-thread trainer beside a 2-thread generator: the OpenMP
    pools spun against each other and a run took 6.6 min instead of 77 s."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(budget)
        assert split_cpu_threads(torch.device("cpu"), generators) == share
        assert torch.get_num_threads() == share
        torch.set_num_threads(budget)
        assert split_cpu_threads(torch.device("cuda", 0), generators) == 0  # GPUs: threads left alone
        assert torch.get_num_threads() == budget
    finally:
        torch.set_num_threads(before)
