"""The two ways to fit Eq. 1 by name (``--method``): ``fast`` (continuous search) and ``paper`` (App. A.5's
grid), registered like every other axis (rlscale.config.axis), each imported when chosen."""
from __future__ import annotations

from typing import Callable

import numpy as np

from rlscale.config.axis import Axis, Option
from rlscale.fit.forms import SigmoidParams
from rlscale.fit.space import SearchSpace

Fitter = Callable[[np.ndarray, np.ndarray, float, SearchSpace], SigmoidParams]
METHOD = Axis("--method", {
    "fast": Option("continuous search of B and C_mid at each A (rlscale.fit.fast)", "rlscale.fit.fast:fit_fast"),
    "paper": Option("App. A.5's grid over A and C_mid (rlscale.fit.paper)", "rlscale.fit.paper:fit_paper"),
})


def fitter(method: str) -> Fitter:
    """The fit of Eq. 1 that ``method`` names."""
    return METHOD.load(method)
