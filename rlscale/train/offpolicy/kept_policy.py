"""The weights of one policy version, kept while the learner moves on (PPO-off-policy-k, Section 3.1).

PPO-off-policy-k samples its k batches from the policy version that began the block. Rather than
generating all k batches at once (a step k times as long as the others, every k-th update), the
generator samples each batch just before its update with the kept weights swapped into the policy:
the live weights go to a scratch copy, the kept ones are copied in, and the live ones come back after
generation. Copies are in place, so the learner's optimizer, a compiled learner and the generator's
captured CUDA graphs keep pointing at the same tensors. Memory: two extra copies of the parameters.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List, Optional

import torch


class KeptPolicy:
    """A copy of ``model``'s parameters taken by ``keep`` and swapped in by ``swapped_in``."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.kept: Optional[List[torch.Tensor]] = None
        self.scratch: Optional[List[torch.Tensor]] = None

    @property
    def live(self) -> List[torch.Tensor]:
        """The model's parameter tensors now (a learner may have re-typed or moved them since)."""
        return [p.data for p in self.model.parameters()]

    @torch.no_grad()
    def keep(self) -> None:
        """Keep the model's current parameters."""
        if self.kept is None:
            self.kept = [t.clone() for t in self.live]
        else:
            torch._foreach_copy_(self.kept, self.live)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The kept parameters in the model for the block, the live ones back afterwards."""
        if self.kept is None:
            raise RuntimeError("KeptPolicy.swapped_in before keep")
        live = self.live
        with torch.no_grad():
            if self.scratch is None:
                self.scratch = [torch.empty_like(t) for t in live]
            torch._foreach_copy_(self.scratch, live)
            torch._foreach_copy_(live, self.kept)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(live, self.scratch)

    def state_dict(self) -> Optional[List[torch.Tensor]]:
        return None if self.kept is None else [t.detach().cpu() for t in self.kept]

    def load_state_dict(self, state: Optional[List[torch.Tensor]]) -> None:
        if state is None:
            self.kept = None
            return
        live = self.live
        if len(state) != len(live) or any(s.shape != t.shape for s, t in zip(state, live)):
            raise ValueError("checkpoint: the kept PPO-off-policy weights do not match the policy's parameters")
        self.kept = [s.to(t.device, t.dtype).clone() for s, t in zip(state, live)]
