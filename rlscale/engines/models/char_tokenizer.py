"""A character-level tokenizer that ships with the project, for the embedded tiny model.

Printable ASCII plus newline, one token each; special tokens for padding, sequence ends, the think
markers and the interruption phrase (Section 3.2: "Okay, time is up. ... </think>") as a single token,
so an interrupted trace costs one forced token rather than eighty characters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from rlscale.core.types import THINK_CLOSE, THINK_OPEN

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
INTERRUPT = "<interrupt>"


@dataclass(frozen=True)
class CharTokenizer:
    """Deterministic vocabulary: specials first, then characters 32..126 and newline."""

    interruption_phrase: str
    think: bool = True

    @property
    def specials(self) -> List[str]:
        return [PAD, BOS, EOS, THINK_OPEN, THINK_CLOSE, INTERRUPT]

    @property
    def vocab(self) -> List[str]:
        return self.specials + ["\n"] + [chr(c) for c in range(32, 127)]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_id(self, token: str) -> int:
        return self.vocab.index(token)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return 2

    @property
    def think_open_id(self) -> int:
        return 3

    @property
    def think_close_ids(self) -> List[int]:
        return [4]

    @property
    def interrupt_ids(self) -> List[int]:
        return [5]

    def encode_prompt(self, question: str) -> List[int]:
        """``<bos>question<think>``: the model continues with its trace (without ``think``:
        ``<bos>question``, the model continues with its answer)."""
        return [self.bos_id] + self.encode(question) + ([self.think_open_id] if self.think else [])

    def encode(self, text: str) -> List[int]:
        """Encode text; the special markers written literally become their single tokens."""
        ids: List[int] = []
        table = {t: i for i, t in enumerate(self.vocab)}
        i = 0
        markers = [THINK_OPEN, THINK_CLOSE, EOS, BOS]
        while i < len(text):
            for marker in markers:
                if text.startswith(marker, i):
                    ids.append(table[marker])
                    i += len(marker)
                    break
            else:
                ids.append(table.get(text[i], table["?"]))
                i += 1
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i in (self.pad_id, self.bos_id, self.eos_id):
                continue
            out.append(self.interruption_phrase if i == self.interrupt_ids[0] else self.vocab[i])
        return "".join(out)
