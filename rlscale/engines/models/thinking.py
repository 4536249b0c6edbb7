"""Whether the policy thinks before it answers (``generation.think``).

With thinking on, the assistant turn opens a ``<think>`` trace, length control acts on that trace
(Section 3.2: interruption or the overlong penalty) and the answer is the text after ``</think>``. With
thinking off, the prompt is rendered with thinking disabled, the whole completion is the answer, and it is
truncated at ``generation.max_answer_tokens``; interruption has no trace to act on.

``auto`` resolves per model: on for the embedded model (its warm-up teaches a trace) and for chat templates
that know thinking (they mention ``enable_thinking`` or ``<think>``, as Qwen3's do); off otherwise (e.g.
SmolLM2-Instruct, whose template has no thinking turn).
"""
from __future__ import annotations

from typing import Optional, Union

from rlscale.core.types import THINK_OPEN

THINKING_MARKERS = ("enable_thinking", THINK_OPEN)


def template_thinks(chat_template: Optional[str]) -> bool:
    """Whether a chat template knows a thinking turn."""
    return bool(chat_template) and any(marker in chat_template for marker in THINKING_MARKERS)


def resolve_think(setting: Union[bool, str], model_thinks: bool, length: str) -> bool:
    """``generation.think`` as a bool for a model that does (``model_thinks``) or does not know thinking.
    ``auto`` that resolves to off under ``length=interruption`` is refused with one line naming the field
    (an explicit ``false`` is refused at validation already)."""
    think = model_thinks if setting == "auto" else bool(setting)
    if not think and length == "interruption":
        raise ValueError("field 'generation.think': auto resolved to false (the model's chat template has no "
                         "thinking turn), but length=interruption needs a thinking trace; set "
                         "generation.think=false length=penalty, or generation.think=true")
    return think
