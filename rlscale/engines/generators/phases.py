"""Per-trace phases of a batch being sampled: think -> (interruption) -> answer -> end (Section 3.2);
without thinking (``PhaseRules.think``) every trace starts in its answer.

With ``interruption`` a trace still thinking at its budget (drawn from the window) gets the phrase
"Okay, time is up. ... </think>" forced in, token by token, then generates its answer; otherwise it is
truncated there. An answer ends at the end-of-sequence token or is truncated at ``max_answer`` tokens.
Every token records its generator log-probability and whether it was sampled (forced tokens are not
trained on). The state lives in fixed tensors updated in place once per decode step, so the eager
generator and a captured CUDA graph (``rlscale.engines.generators.graph_decode``) run the same code.

Each row writes its history at its own column (its trace's length so far), so a row whose trace ended can
start another one (``start_rows``) while the others go on: the refilling generator's rows
(``graph_decode.RefillBucket``). A row that has ended writes padding one column past its trace (the spare
column of the history), never into it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from rlscale.core.types import Completion


@dataclass(frozen=True)
class PhaseRules:
    eos_id: int
    pad_id: int
    think_close_ids: List[int]
    interrupt_ids: List[int]
    max_answer: int
    interruption: bool
    think: bool = True

    def max_steps(self, longest_budget: int) -> int:
        """Decode steps after which every trace has ended: budget + phrase + answer + 1 (without thinking:
        answer + 1)."""
        trace = longest_budget + len(self.interrupt_ids) if self.think else 0
        return trace + self.max_answer + 1


class TracePhases:
    """State of ``rows`` traces, with room for ``steps`` decode steps of history."""

    def __init__(self, rules: PhaseRules, rows: int, steps: int, device: torch.device):
        self.rules = rules
        zeros = lambda dtype: torch.zeros(rows, dtype=dtype, device=device)  # noqa: E731
        self.budgets, self.think_len, self.answer_len, self.lengths = (zeros(torch.long) for _ in range(4))
        self.closed, self.done, self.truncated, self.interrupted = (zeros(torch.bool) for _ in range(4))
        self.force_at = torch.full((rows,), -1, dtype=torch.long, device=device)  # index into the phrase, -1 = none
        self.step = torch.zeros(1, dtype=torch.long, device=device)  # decode steps of the batch so far
        # a trace's history: ``steps`` columns and a spare one that an ended row pads
        self.tokens = torch.zeros((rows, steps + 1), dtype=torch.long, device=device)
        self.logps = torch.zeros((rows, steps + 1), dtype=torch.float32, device=device)
        self.sampled = torch.zeros((rows, steps + 1), dtype=torch.bool, device=device)
        self.interrupt = torch.tensor(rules.interrupt_ids, dtype=torch.long, device=device)
        self.close = torch.tensor(rules.think_close_ids, dtype=torch.long, device=device)
        self.close_offsets = torch.arange(1 - len(rules.think_close_ids), 1, device=device)
        self.pad = torch.tensor(rules.pad_id, dtype=torch.long, device=device)

    def reset(self, budgets: torch.Tensor, live: int) -> None:
        """Start a new batch: rows 0..live-1 think with ``budgets`` [live]; the others are ended already."""
        for t in (self.step, self.tokens, self.logps):
            t.zero_()
        every = torch.zeros_like(self.budgets)
        every[:live] = budgets
        self.start_rows(torch.arange(len(every), device=every.device), every)
        self.done[live:] = True

    def start_rows(self, rows: torch.Tensor, budgets: torch.Tensor) -> None:
        """Start a new trace in each of ``rows`` (indices) with think ``budgets`` (one per row); the other rows
        go on as they are."""
        for t in (self.think_len, self.answer_len, self.lengths):
            t[rows] = 0
        for t in (self.truncated, self.interrupted, self.done):
            t[rows] = False
        self.sampled[rows] = False
        self.closed[rows] = not self.rules.think  # without thinking every trace starts in its answer
        self.force_at[rows] = -1
        self.budgets[rows] = budgets.to(self.budgets.device)

    def choose(self, draw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(token, forcing): the drawn token, or the next token of the phrase, or padding once ended."""
        forcing = self.force_at >= 0
        token = torch.where(forcing, self.interrupt[self.force_at.clamp(min=0)], draw)
        return torch.where(self.done, self.pad, token), forcing

    def advance(self, token: torch.Tensor, logp: torch.Tensor, forcing: torch.Tensor) -> None:
        """Record step ``step`` (token, its log-probability) and move every trace to its next phase."""
        r = self.rules
        active = ~self.done
        column = self.lengths.unsqueeze(1)  # the trace's next position (an ended row: one past its end)
        self.tokens.scatter_(1, column, token.unsqueeze(1))
        self.logps.scatter_(1, column, logp.float().unsqueeze(1))
        self.sampled.scatter_(1, column, (active & ~forcing).unsqueeze(1))
        self.lengths += active.long()

        in_answer = active & self.closed
        self.answer_len += in_answer.long()
        hit_eos = in_answer & (token == r.eos_id)
        capped = in_answer & (self.answer_len >= r.max_answer) & ~hit_eos
        self.done |= hit_eos | capped
        self.truncated |= capped

        thinking = active & ~self.closed & ~forcing
        self.think_len += thinking.long()
        just_closed = thinking & self._closes()
        self.closed |= just_closed
        self.done |= thinking & (token == r.eos_id)  # ended without an answer
        force_next = self.force_at + 1
        finished_phrase = forcing & (force_next >= len(r.interrupt_ids))
        self.closed |= finished_phrase
        self.force_at.copy_(torch.where(forcing & ~finished_phrase, force_next, torch.full_like(force_next, -1)))
        over = thinking & ~just_closed & ~self.done & (self.think_len >= self.budgets)
        if r.interruption:
            self.force_at.masked_fill_(over, 0)
            self.interrupted |= over
        else:
            self.done |= over
            self.truncated |= over
        self.step += 1

    def _closes(self) -> torch.Tensor:
        """Rows whose last tokens (this step's included) spell ``</think>`` (read for the rows still running)."""
        index = (self.lengths.unsqueeze(1) - 1 + self.close_offsets).clamp(min=0)
        tail = self.tokens.gather(1, index)
        return (tail == self.close).all(-1) & (self.lengths >= len(self.close))

    def completions(self, prompts: Sequence[List[int]], versions: Sequence[int], decode,
                    rows: Optional[Sequence[int]] = None, starts: Optional[Sequence[int]] = None) -> List[Completion]:
        """The traces of ``rows`` (default: the first ``len(prompts)``) as completions of ``prompts``; a trace
        still running has run out of steps. ``versions`` holds the policy version of every decode step of the
        batch and a trace's tokens are those of steps ``starts[i]`` on (default 0: every trace began at step
        0)."""
        n = len(prompts)
        rows = list(range(n)) if rows is None else list(rows)
        starts = [0] * n if starts is None else list(starts)
        index = torch.tensor(rows, dtype=torch.long, device=self.lengths.device)
        lengths = self.lengths[index].cpu()
        width = int(lengths.max()) if n else 0
        tokens = self.tokens[index, :width].cpu()
        logps = self.logps[index, :width].cpu()
        sampled = self.sampled[index, :width].cpu()
        truncated = (self.truncated[index] | ~self.done[index]).cpu()
        interrupted, think = self.interrupted[index].cpu(), self.think_len[index].cpu()
        out = []
        for i in range(n):
            length = int(lengths[i])
            seq = tokens[i, :length].tolist()
            out.append(Completion(prompt_ids=list(prompts[i]), tokens=seq, gen_logp=logps[i, :length].tolist(),
                                  sampled=sampled[i, :length].tolist(),
                                  versions=list(versions[starts[i]:starts[i] + length]),
                                  interrupted=bool(interrupted[i]), truncated=bool(truncated[i]),
                                  think_tokens=int(think[i]), text=decode(seq), thinks=self.rules.think))
        return out

    def all_done(self) -> bool:
        return bool(self.done.all())

    def steps_taken(self) -> int:
        return int(self.lengths.max()) if self.lengths.numel() else 0


def left_pad(prompts: Sequence[List[int]], rows: int, pad_id: int, device: Optional[torch.device] = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) [rows, longest prompt], prompts right-aligned; rows past the prompts are padding."""
    width = max(len(p) for p in prompts)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    attn = torch.zeros((rows, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        attn[i, width - len(p):] = 1
    return ids.to(device), attn.to(device)
