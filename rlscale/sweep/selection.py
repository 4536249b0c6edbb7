"""Which runs of a sweep spec one invocation trains: its seeds (``--seeds``) and its variants (``--only``).

``--seeds N`` trains seeds 0..N-1 of every variant (one seed: the run folder is the variant's name and its
seed is the config's). ``--seeds 10,11,12`` or ``--seeds 10-12`` trains exactly those seeds, each in
``<variant>_s<k>`` with ``seed=k`` even when one seed is named (``--seeds 7-7``): fresh seeds of a planned
sweep are the independent runs that check a plan's prediction for new seeds (App. A.7's seed spread).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

from rlscale.sweep.spec import SpecError

_RANGE = re.compile(r"^(\d+)-(\d+)$")


@dataclass(frozen=True)
class SeedChoice:
    """The seeds of every variant. ``named``: run folders are ``<variant>_s<k>`` (several seeds, or seeds
    chosen by value); otherwise the one run's folder is the variant's name."""

    values: Tuple[int, ...]
    named: bool

    @classmethod
    def count(cls, n: int) -> "SeedChoice":
        if n < 1:
            raise SpecError(f"--seeds: must be >= 1, got {n}")
        return cls(values=tuple(range(n)), named=n > 1)


def parse_seeds(value: Union[int, str, None]) -> Optional[SeedChoice]:
    """``--seeds``: a count N (seeds 0..N-1), a comma list of seeds (``10,11,12``) or a range (``10-12``,
    both ends included); None when the option is not given (the spec's ``seeds`` count)."""
    if value is None:
        return None
    text = str(value).strip()
    if text.isdigit():
        return SeedChoice.count(int(text))
    seeds = []
    for part in (p.strip() for p in text.split(",")):
        bounds = _RANGE.match(part)
        if bounds:
            lo, hi = int(bounds.group(1)), int(bounds.group(2))
            if hi < lo:
                raise SpecError(f"--seeds: range {part!r} ends before it starts")
            seeds.extend(range(lo, hi + 1))
        elif part.isdigit():
            seeds.append(int(part))
        else:
            raise SpecError(f"--seeds: expected a count N, seeds like 10,11,12 or a range like 10-12, got {text!r}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise SpecError(f"--seeds: seed {repeated[0]} is named twice")
    return SeedChoice(values=tuple(seeds), named=True)


def parse_only(value: Optional[str]) -> Optional[Tuple[str, ...]]:
    """``--only``: comma-separated variant names (None: every variant)."""
    if value is None:
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if not names:
        raise SpecError("--only: name at least one variant")
    return names


def pick_variants(names: Sequence[str], only: Optional[Tuple[str, ...]], spec_path: object) -> Tuple[str, ...]:
    """The variant names ``only`` keeps, in the spec's order; a name the spec lacks is an error."""
    if only is None:
        return tuple(names)
    unknown = [n for n in only if n not in names]
    if unknown:
        raise SpecError(f"--only: {spec_path} has no variant {unknown[0]!r} (variants: {', '.join(names)})")
    return tuple(n for n in names if n in only)
