"""CHAMP (Mao et al., 2024): 270 competition math problems with final answers, shipped offline by the
``champ-dataset`` package. ``task.path=champ`` selects it, so the math task (Section 2's Math-Verify
rewards) runs on a real data set without any local file.

CHAMP's answers are written for humans ("C(10, 5), or equivalently 252", "0 is the only possible
value"); the rules below reduce the common phrasings to the checkable expression. Answers that stay
free text (about a quarter, e.g. "No integer solutions") are kept as they are; Math-Verify can only
match them literally.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import List, Tuple

from rlscale.tasks.base import Problem

CHAMP_VERSION = "v0"
CHAMP_PROBLEMS = 270  # in CHAMP_VERSION: what task.val_size is checked against before they are read

# (pattern, replacement) applied in order to each answer.
ANSWER_RULES = (
    (re.compile(r"^.*, or equivalently (.+)$"), r"\1"),
    (re.compile(r"^(.+?), or (?:approximately|an equivalent form) .*$"), r"\1"),
    (re.compile(r"^(.+?) \((?:i\.e\.,|none|no) .*\)$"), r"\1"),
    (re.compile(r"^(.+?) is the only possible value$"), r"\1"),
    (re.compile(r"^The (?:limit exists and is equal to|only possible value for the limit is) (.+)$"), r"\1"),
)


def final_answer(raw: str) -> str:
    """The checkable part of a CHAMP answer ("2*C(10, 5), or equivalently 504" -> "504")."""
    answer = raw.strip()
    for pattern, replacement in ANSWER_RULES:
        answer = pattern.sub(replacement, answer)
    return answer


def champ_problems() -> List[Problem]:
    """The 270 CHAMP problems in identifier order (``P_Combinatorics_1`` ... ``P_Sequence_50``)."""
    return list(_load())


@lru_cache(maxsize=1)
def _load() -> Tuple[Problem, ...]:
    """Parsed once per process: the package's JSON (72 MB with model transcripts) takes seconds to read."""
    try:
        import champ_dataset
    except ImportError:
        raise ImportError("task.path=champ needs the champ-dataset package: pip install champ-dataset") from None
    dataset = champ_dataset.load(CHAMP_VERSION)
    dataset.sort()
    return tuple(
        Problem(index=i, prompt=p.text, answer=final_answer(p.answer),
                meta={"source": "champ", "row": i, "identifier": p.identifier, "category": p.category,
                      "raw_answer": p.answer})
        for i, p in enumerate(dataset.problems.values())
    )
