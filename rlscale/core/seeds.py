"""Seeds derived from a run's seed for one stream of draws (an eval set, a PipelineRL chunk).

A derived seed is ``base + 1_000_003 * seed + index`` taken modulo 2**64, the range ``torch.manual_seed``
accepts: a run's seed may then be any value the schema allows (up to 2**63 - 1), and every seed below
about 9e12 gives the same streams as the unreduced sum.
"""
from __future__ import annotations

SEED_RANGE = 2 ** 64  # torch.manual_seed: [-2**63, 2**64 - 1]
SEED_STRIDE = 1_000_003


def derived_seed(base: int, seed: int, index: int) -> int:
    """The seed of stream ``index`` of the run seeded ``seed``, in a family of streams set apart by ``base``."""
    return (base + SEED_STRIDE * seed + index) % SEED_RANGE
