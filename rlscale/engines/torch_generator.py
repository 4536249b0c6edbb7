"""The native torch generator: batched sampling with a KV cache, one forward per decode step.

Every sampled token records the generator's log-probability (the denominator of rho, Section 3.2) and
the policy version that sampled it (PipelineRL, Section 3.1). Length control (Section 3.2): with
``interruption`` a trace still thinking at its budget (drawn uniformly from the window) gets the
interruption phrase forced in, then the answer is generated; otherwise it is truncated there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import torch
from transformers import DynamicCache

from rlscale.config.schema import GenerationConfig, LengthConfig
from rlscale.engines.policy import head_logits
from rlscale.engines.tokens import PolicyTokenizer


@dataclass
class Completion:
    """One sampled completion. ``sampled[t]`` is False for forced tokens (the interruption phrase),
    which are not trained on. ``versions[t]``: policy version that produced token t."""

    prompt_ids: List[int]
    tokens: List[int]
    gen_logp: List[float]
    sampled: List[bool]
    versions: List[int]
    interrupted: bool = False
    truncated: bool = False
    think_tokens: int = 0
    text: str = ""


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    decode_steps: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


class TorchGenerator:
    """Samples completions from ``model`` (a transformers causal LM). ``version_hook``, called between
    decode steps, may swap the weights in place and returns the current policy version (the in-flight
    update of PipelineRL); without it the version is the one given to ``generate``."""

    def __init__(self, model, tok: PolicyTokenizer, gen_cfg: GenerationConfig, length_cfg: LengthConfig,
                 fp32_head: bool, device: torch.device):
        self.model = model
        self.tok = tok
        self.gen_cfg = gen_cfg
        self.length_cfg = length_cfg
        self.fp32_head = fp32_head
        self.device = device
        self.stats = GenerationStats()

    def _think_budgets(self, n: int, rng: torch.Generator) -> torch.Tensor:
        if self.length_cfg.name == "interruption":
            lo, hi = self.length_cfg.window
            return torch.randint(lo, hi + 1, (n,), generator=rng)
        return torch.full((n,), self.gen_cfg.max_think_tokens, dtype=torch.long)

    @torch.no_grad()
    def generate(self, prompts: Sequence[List[int]], rng: torch.Generator, version: int = 0,
                 version_hook: Optional[Callable[[], int]] = None) -> List[Completion]:
        import time

        start = time.perf_counter()
        n = len(prompts)
        dev = self.device
        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.tok.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            attn[i, width - len(p):] = 1
        ids, attn = ids.to(dev), attn.to(dev)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        out = self.model.model(input_ids=ids, attention_mask=attn, position_ids=positions,
                               past_key_values=cache, use_cache=True)
        last_hidden = out.last_hidden_state[:, -1]
        next_pos = positions[:, -1] + 1

        budgets = self._think_budgets(n, rng).to(dev)
        interrupt = torch.tensor(self.tok.interrupt_ids, device=dev)
        close = self.tok.think_close_ids
        max_answer = self.gen_cfg.max_answer_tokens
        max_steps = int(budgets.max()) + len(interrupt) + max_answer + 1
        think_len = torch.zeros(n, dtype=torch.long, device=dev)
        answer_len = torch.zeros(n, dtype=torch.long, device=dev)
        closed = torch.zeros(n, dtype=torch.bool, device=dev)
        done = torch.zeros(n, dtype=torch.bool, device=dev)
        truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        interrupted = torch.zeros(n, dtype=torch.bool, device=dev)
        force_at = torch.full((n,), -1, dtype=torch.long, device=dev)  # index into the phrase, -1 = none
        lengths = torch.zeros(n, dtype=torch.long, device=dev)
        tokens, logps, sampled_flags, versions = [], [], [], []
        current_version = version
        steps = 0
        for _ in range(max_steps):
            if version_hook is not None:
                current_version = version_hook()
            logits = head_logits(self.model, last_hidden, self.fp32_head) / self.gen_cfg.temperature
            logprobs = torch.log_softmax(logits, dim=-1)
            draw = torch.multinomial(logprobs.exp(), 1, generator=rng).squeeze(-1)
            forcing = force_at >= 0
            token = torch.where(forcing, interrupt[force_at.clamp(min=0)], draw)
            token = torch.where(done, torch.full_like(token, self.tok.pad_id), token)
            logp = logprobs.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            active = ~done
            lengths += active.long()
            tokens.append(token)
            logps.append(logp)
            sampled_flags.append(active & ~forcing)
            versions.append(current_version)

            # bookkeeping of the phases: think -> (interruption) -> answer -> eos
            in_answer = active & closed
            answer_len += in_answer.long()
            hit_eos = in_answer & (token == self.tok.eos_id)
            done |= hit_eos
            done |= in_answer & (answer_len >= max_answer) & ~hit_eos
            truncated |= in_answer & (answer_len >= max_answer) & ~hit_eos

            thinking = active & ~closed & ~forcing
            think_len += thinking.long()
            if len(close) == 1:
                just_closed = thinking & (token == close[0])
            else:
                just_closed = thinking & self._tail_matches(tokens, close)
            closed |= just_closed
            done |= thinking & (token == self.tok.eos_id)  # ended without an answer
            force_next = force_at + 1
            finished_phrase = forcing & (force_next >= len(interrupt))
            closed |= finished_phrase
            force_at = torch.where(forcing & ~finished_phrase, force_next, torch.full_like(force_at, -1))
            over = thinking & ~just_closed & ~done & (think_len >= budgets)
            if self.length_cfg.name == "interruption":
                force_at = torch.where(over, torch.zeros_like(force_at), force_at)
                interrupted |= over
            else:
                done |= over
                truncated |= over
            steps += 1
            if bool(done.all()):
                break
            attn = torch.cat([attn, active.long().unsqueeze(-1)], dim=-1)
            out = self.model.model(input_ids=token.unsqueeze(-1), attention_mask=attn,
                                   position_ids=next_pos.unsqueeze(-1), past_key_values=cache, use_cache=True)
            last_hidden = out.last_hidden_state[:, -1]
            next_pos = next_pos + 1
        truncated |= ~done  # ran out of steps

        tok_mat = torch.stack(tokens, 1).cpu()
        logp_mat = torch.stack(logps, 1).float().cpu()
        samp_mat = torch.stack(sampled_flags, 1).cpu()
        completions = []
        total = 0
        for i in range(n):
            length = int(lengths[i])
            seq = tok_mat[i, :length].tolist()
            total += length
            completions.append(Completion(
                prompt_ids=list(prompts[i]), tokens=seq, gen_logp=logp_mat[i, :length].tolist(),
                sampled=samp_mat[i, :length].tolist(), versions=list(versions[:length]),
                interrupted=bool(interrupted[i]), truncated=bool(truncated[i]), think_tokens=int(think_len[i]),
                text=self.tok.decode(seq)))
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        self.stats.generated_tokens += total
        self.stats.decode_steps += steps
        self.stats.seconds += time.perf_counter() - start
        return completions

    @staticmethod
    def _tail_matches(tokens: List[torch.Tensor], pattern: List[int]) -> torch.Tensor:
        if len(tokens) < len(pattern):
            return torch.zeros_like(tokens[-1], dtype=torch.bool)
        tail = torch.stack(tokens[-len(pattern):], 1)
        return (tail == torch.tensor(pattern, device=tail.device)).all(-1)
