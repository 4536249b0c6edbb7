"""The two ways to fit Eq. 1 by name: ``paper`` (App. A.5's grid) and ``fast`` (continuous search)."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from rlscale.fit.fast import fit_fast
from rlscale.fit.forms import SigmoidParams
from rlscale.fit.schema import METHOD_NAMES
from rlscale.fit.paper import fit_paper
from rlscale.fit.space import SearchSpace

Fitter = Callable[[np.ndarray, np.ndarray, float, SearchSpace], SigmoidParams]
FITTERS: Dict[str, Fitter] = {"fast": fit_fast, "paper": fit_paper}
METHODS = tuple(FITTERS)
assert METHODS == METHOD_NAMES, "the CLI choices of --method are the fitters"
