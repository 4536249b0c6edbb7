"""Phase bookkeeping of the generator (Section 3.2 length control), step by step with scripted draws:
closing the trace with a multi-token ``</think>``, interruption forcing (tokens not sampled), answer
truncation, end-of-sequence, and truncation at the budget without interruption. Both torch engines
(HF dynamic cache on CPU, the static-cache GPU path) run this same code."""
from __future__ import annotations

from dataclasses import replace

import torch

from rlscale.core.types import Completion
from rlscale.engines.generators.phases import PhaseRules, TracePhases

EOS, PAD = 2, 0
CLOSE = [7, 8, 9]
PHRASE = [10, 11, 7, 8, 9]


def run(rules: PhaseRules, budgets, draws):
    """Drive TracePhases with one scripted draw per row and step; returns its completions."""
    rows = len(draws)
    steps = max(len(d) for d in draws)
    ph = TracePhases(rules, rows, steps, torch.device("cpu"))
    ph.reset(torch.tensor(budgets), rows)
    for t in range(steps):
        draw = torch.tensor([d[t] if t < len(d) else 3 for d in draws])
        token, forcing = ph.choose(draw)
        logp = -torch.arange(rows, dtype=torch.float) - 0.5 * t  # recognisable values
        ph.advance(token, logp, forcing)
    return ph.completions([[1]] * rows, list(range(100, 100 + steps)), lambda ids: " ".join(map(str, ids)))


def rules(interruption: bool, think: bool = True) -> PhaseRules:
    return PhaseRules(eos_id=EOS, pad_id=PAD, think_close_ids=CLOSE, interrupt_ids=PHRASE, max_answer=3,
                      interruption=interruption, think=think)


def test_closing_the_trace_with_a_multi_token_marker_starts_the_answer():
    out = run(rules(True), [20], [[4, 7, 8, 9, 5, EOS, 6, 6]])[0]
    assert out.tokens == [4, 7, 8, 9, 5, EOS]
    assert out.sampled == [True] * 6
    assert not out.interrupted and not out.truncated and out.think_tokens == 4
    assert out.versions == [100, 101, 102, 103, 104, 105]
    assert out.gen_logp == [-0.5 * t for t in range(6)]


def test_interruption_forces_the_phrase_then_the_answer_is_capped():
    draws = [[4, 5, 6, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6]]
    out = run(rules(True), [3], draws)[0]
    assert out.tokens == [4, 5, 6] + PHRASE + [6, 6, 6]
    assert out.sampled == [True] * 3 + [False] * len(PHRASE) + [True] * 3
    assert out.interrupted and out.truncated and out.think_tokens == 3


def test_end_of_sequence_in_the_answer_after_interruption_is_not_truncation():
    out = run(rules(True), [2], [[4, 4, 0, 0, 0, 0, 0, EOS, 5, 5]])[0]
    assert out.tokens == [4, 4] + PHRASE + [EOS]
    assert out.interrupted and not out.truncated


def test_without_interruption_the_budget_truncates():
    out = run(rules(False), [3, 30], [[4, 5, 6, 7, 8], [4, EOS, 5, 5, 5]])
    assert out[0].tokens == [4, 5, 6] and out[0].truncated and not out[0].interrupted
    assert out[1].tokens == [4, EOS] and not out[1].truncated  # ended while thinking: no answer, not truncated


def test_a_trace_still_running_when_the_steps_run_out_is_truncated():
    out = run(rules(True), [50], [[4, 5, 6]])[0]
    assert out.tokens == [4, 5, 6] and out.truncated


def test_rows_past_the_live_ones_start_ended():
    ph = TracePhases(rules(True), 4, 3, torch.device("cpu"))
    ph.reset(torch.tensor([5, 5]), 2)
    token, forcing = ph.choose(torch.tensor([4, 4, 4, 4]))
    assert token.tolist() == [4, 4, PAD, PAD] and not forcing.any()
    ph.advance(token, torch.zeros(4), forcing)
    assert ph.lengths.tolist() == [1, 1, 0, 0] and ph.sampled[:, 0].tolist() == [True, True, False, False]


def test_without_thinking_the_completion_is_the_answer_capped_at_max_answer():
    out = run(rules(False, think=False), [1, 1, 1], [[4, 5, EOS, 6], [7, 8, 9, 5, 5], [4, 5, 6, 7, 8]])
    assert out[0].tokens == [4, 5, EOS] and not out[0].truncated  # a short answer ends at EOS
    assert out[1].tokens == [7, 8, 9] and out[1].truncated  # </think> is plain text here; the cap truncates
    assert out[2].tokens == [4, 5, 6] and out[2].truncated and not out[2].interrupted
    assert [c.think_tokens for c in out] == [0, 0, 0] and all(all(c.sampled) for c in out)
    assert not any(c.thinks for c in out)
    assert rules(False, think=False).max_steps(30) == 3 + 1  # the answer cap and one step, no think budget


def test_the_answer_is_the_text_after_the_trace_or_the_whole_completion_without_thinking():
    thinking = Completion(prompt_ids=[1], tokens=[], gen_logp=[], sampled=[], versions=[],
                          text="4+5=9</think> The answer is 9.")
    assert thinking.answer == "The answer is 9."
    assert replace(thinking, text="still thinking 4+5").answer == ""  # no </think>: no answer
    assert replace(thinking, thinks=False, text=" The answer is 9.\n").answer == "The answer is 9."


def test_a_row_started_again_writes_its_new_trace_from_column_zero_and_the_others_go_on():
    """The refilling generator's bookkeeping: row 0 (budget 1) is interrupted after one token of thought and,
    ended after three steps, starts a new trace (budget 2) while row 1 keeps thinking; each row's history is
    its own trace, and a completion's versions are those of the decode steps from its start."""
    ph = TracePhases(rules(True), 2, 8, torch.device("cpu"))
    ph.reset(torch.tensor([1, 20]), 2)

    def step(draws) -> None:
        token, forcing = ph.choose(torch.tensor(draws))
        ph.advance(token, torch.zeros(2), forcing)

    for draws in ([4, 4], [5, 5], [6, 6]):
        step(draws)
    ph.done[0] = True  # ended, as the generator sees it at a done-check (here: before its phrase is over)
    first = ph.completions([[1]], list(range(100, 103)), str, rows=[0])[0]
    ph.start_rows(torch.tensor([0]), torch.tensor([2]))
    assert ph.lengths.tolist() == [0, 3] and not ph.done.any() and ph.budgets.tolist() == [2, 20]
    for draws in ([7, 7], [8, 8], [9, 9]):
        step(draws)
    second, other = ph.completions([[1], [2]], list(range(100, 106)), str, rows=[0, 1], starts=[3, 0])
    assert first.tokens == [4, PHRASE[0], PHRASE[1]] and first.versions == [100, 101, 102] and first.interrupted
    assert second.tokens == [7, 8, PHRASE[0]] and second.versions == [103, 104, 105]
    assert second.think_tokens == 2 and second.interrupted and second.sampled == [True, True, False]
    assert other.tokens == [4, 5, 6, 7, 8, 9] and other.versions == list(range(100, 106)) and other.think_tokens == 6
