"""The completions table a tracker logs at every eval, as TRL's and verl's do: for each of the first
``logger.completions_rows`` held-out prompts, the first completion the policy sampled for it at that eval and its
reward, with the run step. The rows are the eval's own samples (``rlscale.train.evaluate``, the records of
samples.jsonl), so the table shows what ``val_reward`` (Section 2's R_C) was measured on. A completion longer
than ``MAX_CHARS`` (a reasoning trace at the paper's 12,288 + 2,048 tokens is some 50,000 characters) keeps its
beginning and its end, the answer, around a marker saying how many characters were cut, so eight rows stay
tens of kilobytes per eval.

For TensorBoard the table is markdown (its text plugin renders it): every cell is escaped, so a completion's
``|``, ``*``, backticks, HTML and line breaks show as written and never break the table."""
from __future__ import annotations

import html
import re
from dataclasses import astuple, dataclass
from typing import List, Mapping, Sequence

COLUMNS = ("step", "prompt", "completion", "reward")
MAX_ROWS = 1000
"""The most rows ``logger.completions_rows`` may ask for per eval."""
MAX_CHARS = 4000
"""The most characters of a completion a row keeps: its first and last ``MAX_CHARS // 2``."""

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")  # what python-markdown (TensorBoard's) lets a backslash escape


@dataclass(frozen=True)
class CompletionRow:
    """One row: the run step of the eval, the prompt as the task states it, the completion, its reward."""

    step: int
    prompt: str
    completion: str
    reward: float

    @classmethod
    def of_sample(cls, sample: Mapping) -> "CompletionRow":
        """The row of one samples.jsonl record (``step``, ``prompt``, ``completion``, ``reward``)."""
        return cls(int(sample["step"]), str(sample["prompt"]), shortened(str(sample["completion"])),
                   float(sample["reward"]))

    def cells(self) -> list:
        """The row's values in ``COLUMNS`` order."""
        return list(astuple(self))


def shortened(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` whole when it has at most ``limit`` characters, else its first and last ``limit // 2`` around
    ``[... N characters cut ...]``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [... {len(text) - 2 * half:,} characters cut ...] {text[-half:]}"


def completion_rows(samples: Sequence[Mapping], limit: int) -> List[CompletionRow]:
    """The rows of the first ``limit`` samples of an eval."""
    return [CompletionRow.of_sample(sample) for sample in samples[:limit]]


def markdown_cell(value: object) -> str:
    """``value`` as one markdown table cell showing its text exactly: HTML escaped, markdown's punctuation
    backslash-escaped, line breaks as ``<br>``."""
    text = _MARKDOWN.sub(r"\\\1", html.escape(str(value), quote=False))
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def markdown_table(rows: Sequence[CompletionRow]) -> str:
    """The rows as a markdown table with a header of ``COLUMNS``."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(markdown_cell(cell) for cell in row.cells()) + " |" for row in rows]
    return "\n".join(lines)
