"""The native torch generator: batched sampling with a KV cache, one forward per decode step.

Every sampled token records the generator's log-probability (the denominator of rho, Section 3.2) and
the policy version that sampled it (PipelineRL, Section 3.1). Length control (Section 3.2): with
``interruption`` a trace still thinking at its budget (drawn uniformly from the window) gets the
interruption phrase forced in, then the answer is generated; otherwise it is truncated there
(``rlscale.engines.generators.phases``).

Two engines share that bookkeeping. On CUDA, for Llama / Qwen2 / Qwen3-shaped models, the GPU path of
``rlscale.engines.generators.graph_decode`` (static KV cache, fused Gumbel-max sampling, CUDA graphs; the sampling
seed is drawn from ``rng``; with ``rows`` > 0, ``engine.generator_rows``, at most that many rows at once, each
refilled with the next prompt as its trace ends). Elsewhere, HF's forward with a ``DynamicCache`` and ``torch.multinomial``
driven by ``rng`` itself (on CPU the draws are those of ``rng``, so a seeded run repeats exactly).
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence

import torch
from transformers import DynamicCache

from rlscale.config.schema import GenerationConfig
from rlscale.core.protocols import PolicyTokenizer
from rlscale.core.types import Completion, GenerationStats
from rlscale.engines.generators import static_decoder
from rlscale.engines.generators.build import GeneratorSettings
from rlscale.engines.generators.graph_decode import GraphDecoder
from rlscale.engines.generators.phases import PhaseRules, TracePhases, left_pad
from rlscale.engines.models.policy import head_logits
from rlscale.rl.length import LengthConfig

SEED_BOUND = 2**62


def backbone_step(model, ids: torch.Tensor, attn: torch.Tensor, positions: torch.Tensor, cache: DynamicCache):
    """One forward of the HF decoder stack (no head) that extends ``cache``. The cache goes fourth,
    positionally: transformers 5.2x renamed the argument from ``past_key_values`` to ``cache`` (and warns
    on the old name), and both spellings take that place in every decoder-only family."""
    return model.model(ids, attn, positions, cache, use_cache=True)


class TorchGenerator:
    """Samples completions from ``model`` (a transformers causal LM). ``version_hook``, called between
    decode steps, may swap the weights in place and returns the current policy version (the in-flight
    update of PipelineRL); without it the version is the one given to ``generate``. Without ``think``
    the prompts end where the answer starts and the whole completion is the answer."""

    def __init__(self, model, tok: PolicyTokenizer, gen_cfg: GenerationConfig, length_cfg: LengthConfig,
                 fp32_head: bool, device: torch.device, compiled: bool = True, think: bool = True, rows: int = 0):
        self.model = model
        self.tok = tok
        self.gen_cfg = gen_cfg
        self.length_cfg = length_cfg
        self.fp32_head = fp32_head
        self.device = device
        self.stats = GenerationStats()
        self.rules = PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=list(tok.think_close_ids),
                                interrupt_ids=list(tok.interrupt_ids), max_answer=gen_cfg.max_answer_tokens,
                                interruption=length_cfg.name == "interruption", think=think)
        self.engine: Optional[GraphDecoder] = None
        if device.type == "cuda" and static_decoder.supports(model):
            self.engine = GraphDecoder(model, self.rules, fp32_head, gen_cfg.temperature, self._longest_budget(),
                                       compiled=compiled, rows=rows)

    @classmethod
    def from_settings(cls, settings: GeneratorSettings, model, tok: PolicyTokenizer,
                      device: torch.device) -> "TorchGenerator":
        """``engine.generator=torch``: on ``device``, compiled on CUDA when ``settings.compiled``, with at most
        ``settings.rows`` rows at once on CUDA (0: every row of a call)."""
        return cls(model, tok, settings.generation, settings.length, settings.fp32_head, device,
                   compiled=settings.compiled, think=tok.think, rows=settings.rows)

    @property
    def max_new_tokens(self) -> int:
        """The longest completion this generator can sample (think budget, phrase, answer, end)."""
        return self.rules.max_steps(self._longest_budget())

    def _longest_budget(self) -> int:
        return self.length_cfg.longest_think(self.gen_cfg.max_think_tokens)

    @torch.no_grad()
    def generate(self, prompts: Sequence[List[int]], rng: torch.Generator, version: int = 0,
                 version_hook: Optional[Callable[[], int]] = None) -> List[Completion]:
        start = time.perf_counter()
        budgets = self.length_cfg.think_budgets(len(prompts), self.gen_cfg.max_think_tokens, rng)
        if self.engine is not None:
            seed = int(torch.randint(SEED_BOUND, (1,), generator=rng))
            completions, steps = self.engine.generate(prompts, budgets, seed, version, version_hook, self.tok.decode)
        else:
            completions, steps = self._generate_dynamic(prompts, budgets, rng, version, version_hook)
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        self.stats.generated_tokens += sum(len(c.tokens) for c in completions)
        self.stats.decode_steps += steps
        self.stats.seconds += time.perf_counter() - start
        return completions

    def _generate_dynamic(self, prompts: Sequence[List[int]], budgets: torch.Tensor, rng: torch.Generator,
                          version: int, version_hook: Optional[Callable[[], int]]) -> tuple[List[Completion], int]:
        """HF forward with a DynamicCache, one decode step per loop iteration."""
        n, dev = len(prompts), self.device
        if dev.type != "cpu":  # torch.multinomial needs a generator on the logits' device
            rng = torch.Generator(dev).manual_seed(int(torch.randint(SEED_BOUND, (1,), generator=rng)))
        ids, attn = left_pad(prompts, n, self.tok.pad_id, dev)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        out = backbone_step(self.model, ids, attn, positions, cache)
        last_hidden = out.last_hidden_state[:, -1]
        next_pos = positions[:, -1] + 1
        max_steps = self.rules.max_steps(int(budgets.max()))
        phases = TracePhases(self.rules, n, max_steps, dev)
        phases.reset(budgets.to(dev), n)
        versions = []
        current_version = version
        for _ in range(max_steps):
            if version_hook is not None:
                current_version = version_hook()
            versions.append(current_version)
            logits = head_logits(self.model, last_hidden, self.fp32_head) / self.gen_cfg.temperature
            logprobs = torch.log_softmax(logits, dim=-1)
            draw = torch.multinomial(logprobs.exp(), 1, generator=rng).squeeze(-1)
            token, forcing = phases.choose(draw)
            active = ~phases.done
            phases.advance(token, logprobs.gather(-1, token.unsqueeze(-1)).squeeze(-1), forcing)
            if phases.all_done():
                break
            attn = torch.cat([attn, active.long().unsqueeze(-1)], dim=-1)
            out = backbone_step(self.model, token.unsqueeze(-1), attn, next_pos.unsqueeze(-1), cache)
            last_hidden = out.last_hidden_state[:, -1]
            next_pos = next_pos + 1
        return phases.completions(prompts, versions, self.tok.decode), phases.steps_taken()
