"""What the generator and learner need from a tokenizer, for the char tokenizer and HF tokenizers alike."""
from __future__ import annotations

from typing import List, Protocol, Sequence


class PolicyTokenizer(Protocol):
    vocab_size: int
    pad_id: int
    eos_id: int
    think_close_ids: List[int]
    interrupt_ids: List[int]
    think: bool

    def encode_prompt(self, question: str) -> List[int]:
        """Token ids of the prompt, ending where the model starts its ``<think>`` trace (with ``think``)
        or its answer."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        ...
