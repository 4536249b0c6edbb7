"""The vLLM generator backend (``engine.generator=vllm``, optional extra ``[vllm]``).

Same contract as ``TorchGenerator.generate``: completions with the generator's log-prob of every
sampled token (the denominator of rho, Section 3.2), the policy version that sampled each token
(PipelineRL, Section 3.1), and length control by interruption or truncation (Section 3.2; see
``rlscale.engines.generators.vllm_trace``). The LM head runs in FP32 when ``precision.lm_head_fp32`` (ScaleRL),
in bf16 otherwise (``rlscale.engines.generators.vllm_engine``).

Weights: the engine holds its own copy of ``model``'s. ``load_weights(state_dict, version)`` replaces
it in place, without restarting the engine. The engine follows ``model`` as the torch generator does:
whenever the version given to ``generate`` (PPO-off-policy and evaluation pass the step whose weights
the learner's model holds) or returned by ``version_hook`` (called before every engine step; PipelineRL's
generator processes refresh their replica of the policy in place there) differs from the engine's,
``model``'s weights are pushed first. Traces in flight continue on the new weights with their KV cache
as it is, as in PipelineRL's in-flight updates.

Determinism: every trace gets its think budget and two sampling seeds (think and answer requests)
from ``rng``; vLLM samples each seeded request with its own generator, independently of batching.
"""
from __future__ import annotations

import shutil
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import torch

from rlscale.config.schema import GenerationConfig
from rlscale.core.protocols import PolicyTokenizer
from rlscale.core.types import Completion, GenerationStats
from rlscale.engines.generators.build import GeneratorSettings
from rlscale.engines.generators.vllm_engine import engine_settings, export_checkpoint, reload_weights, start_engine
from rlscale.engines.generators.vllm_trace import EngineRequest, Trace, TraceRules
from rlscale.rl.length import LengthConfig

SEED_BOUND = 2**31 - 1


class VLLMGenerator:
    """Samples completions of ``model``'s current policy with an in-process vLLM engine."""

    def __init__(self, model, tok: PolicyTokenizer, gen_cfg: GenerationConfig, length_cfg: LengthConfig,
                 fp32_head: bool, seed: int):
        self.model = model
        self.tok = tok
        self.gen_cfg = gen_cfg
        self.length_cfg = length_cfg
        self.rules = TraceRules(eos_id=tok.eos_id, think_close_ids=list(tok.think_close_ids),
                                interrupt_ids=list(tok.interrupt_ids), max_answer_tokens=gen_cfg.max_answer_tokens,
                                interruption=length_cfg.name == "interruption", think=tok.think)
        self.stats = GenerationStats()
        checkpoint = export_checkpoint(model)
        self.llm = start_engine(checkpoint, engine_settings(model, fp32_head, seed))
        shutil.rmtree(checkpoint)  # the engine holds the weights now; updates travel as tensors
        self.version = 0
        self._prefix_cache_stale = False
        self._next_request = 0

    @classmethod
    def from_settings(cls, settings: GeneratorSettings, model, tok: PolicyTokenizer,
                      device: torch.device) -> "VLLMGenerator":
        """``engine.generator=vllm``: vLLM places the engine itself; the engine seed is the run's."""
        return cls(model, tok, settings.generation, settings.length, settings.fp32_head, settings.seed)

    # -- weights -------------------------------------------------------------------------------
    def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Push policy ``version`` into the engine in place. The prefix cache (KV computed with the old
        weights) is dropped now when the engine is idle, else before the next ``generate``: running
        traces keep their KV, as in PipelineRL's in-flight updates."""
        reload_weights(self.llm, state_dict)
        self.version = version
        self._prefix_cache_stale = True
        if not self.llm.llm_engine.has_unfinished_requests():
            self._reset_prefix_cache()

    def _follow_model(self, version: int) -> None:
        if version != self.version:
            self.load_weights(self.model.state_dict(), version)

    def _reset_prefix_cache(self) -> None:
        self._prefix_cache_stale = not self.llm.reset_prefix_cache()

    # -- sampling ------------------------------------------------------------------------------
    def _traces(self, prompts: Sequence[List[int]], rng: torch.Generator) -> List[Trace]:
        n = len(prompts)
        budgets = self.length_cfg.think_budgets(n, self.gen_cfg.max_think_tokens, rng)
        seeds = torch.randint(0, SEED_BOUND, (n, 2), generator=rng)
        return [Trace(list(p), int(b), int(s[0]), int(s[1]), self.rules) for p, b, s in zip(prompts, budgets, seeds)]

    def _submit(self, request: EngineRequest, index: int, owners: Dict[str, int]) -> None:
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(temperature=self.gen_cfg.temperature, max_tokens=request.max_tokens,
                                stop_token_ids=request.stop_token_ids, seed=request.seed, logprobs=0,
                                detokenize=False, output_kind=RequestOutputKind.DELTA)
        request_id = str(self._next_request)
        self._next_request += 1
        owners[request_id] = index
        self.llm.llm_engine.add_request(request_id, TokensPrompt(prompt_token_ids=request.token_ids), params)

    @torch.no_grad()
    def generate(self, prompts: Sequence[List[int]], rng: torch.Generator, version: int = 0,
                 version_hook: Optional[Callable[[], int]] = None) -> List[Completion]:
        start = time.perf_counter()
        self._follow_model(version)
        if self._prefix_cache_stale:
            self._reset_prefix_cache()
        engine = self.llm.llm_engine
        traces = self._traces(prompts, rng)
        owners: Dict[str, int] = {}
        for i, trace in enumerate(traces):
            self._submit(trace.first_request(), i, owners)
        current, steps = version, 0
        while engine.has_unfinished_requests():
            if version_hook is not None:
                current = version_hook()
                self._follow_model(current)
            for out in engine.step():
                i = owners[out.request_id]
                sample = out.outputs[0]
                logps = [entry[token].logprob for token, entry in zip(sample.token_ids, sample.logprobs)]
                traces[i].extend(sample.token_ids, logps, current)
                if out.finished:
                    del owners[out.request_id]
                    follow_up = traces[i].finish_request(current)
                    if follow_up is not None:
                        self._submit(follow_up, i, owners)
            steps += 1
        completions = [t.completion(self.tok.decode(t.tokens)) for t in traces]
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        self.stats.generated_tokens += sum(len(c.tokens) for c in completions)
        self.stats.decode_steps += steps
        self.stats.seconds += time.perf_counter() - start
        return completions
