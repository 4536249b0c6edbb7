"""The fit's fast paths give the numbers of their definitions: A's profile continued from a neighbouring A
(rlscale.fit.fast.FixedAProfile) against a fresh search at each A (rlscale.fit.profile.profile_sse), and the
REML noise estimate on the AR(1) eigenvectors (rlscale.fit.correlated) against the restricted likelihood
computed cell by cell from the n - 3 residual directions."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from rlscale.fit.correlated import (DRIFT_GRID, PHI_GRID, SHARE_GRID, estimate_residual_noise, jacobian)
from rlscale.fit.fast import FixedAProfile, fit_fast
from rlscale.fit.profile import profile_sse
from rlscale.fit.results import FitSettings
from rlscale.fit.space import search_space
from rlscale.fit.window import fit_window
from rlscale.testing.curves import TABLE1, ar1_drift, synthetic_curve


@pytest.mark.parametrize("name,points,noise", [("scalerl", 60, 0.01), ("gen_32k", 30, 0.02), ("code", 100, 0.003)])
def test_continued_profile_is_the_fresh_search(name, points, noise):
    x, y = synthetic_curve(TABLE1[name], points, noise, np.random.default_rng(7))
    window = fit_window(x, FitSettings(x="gpu_hours"))
    xf, yf = x[window.mask(x)], y[window.mask(x)]
    space = search_space(FitSettings(x="gpu_hours"), window)
    point = fit_fast(xf, yf, y[0], space)
    profile = FixedAProfile(xf, yf, y[0], space)
    for side in (np.linspace(point.A, 0.0, 12)[1:], np.linspace(point.A, 1.0, 12)[1:]):  # outward, as the profile
        start = profile.start_of(point)
        for a in side:
            continued, start = profile.sse(a, start)
            fresh = profile_sse(xf, yf, y[0], space, a)
            assert continued <= fresh * (1 + 1e-12)  # never worse than the search from the grid
            assert continued == pytest.approx(fresh, rel=1e-6)


def _dense_reml(jac, residuals, eval_variance=None):
    """The restricted likelihood of every (phi, cell) of the grid from Q'VQ itself (Q: the n - 3 directions
    orthogonal to the Jacobian), as the module docstring defines it: (phi, white, drift, inflation)."""
    n, k = jac.shape
    dof = n - k
    s2 = residuals @ residuals / dof
    q = np.linalg.qr(jac, mode="complete")[0][:, k:]
    projected = q.T @ residuals
    lags = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    weights = np.linalg.solve(jac.T @ jac, jac.T)[0]
    ww = weights @ weights
    white_fixed = min(eval_variance, s2) if eval_variance else None
    cells = DRIFT_GRID if white_fixed is not None else SHARE_GRID
    loglik, white, drift, ratio = (np.empty((PHI_GRID.size, cells.size)) for _ in range(4))
    for i, phi in enumerate(PHI_GRID):
        corr = phi ** lags
        for j, c in enumerate(cells):
            if white_fixed is not None:
                a, b = white_fixed, c * s2
            else:
                a, b = 1 - c, c
            m = q.T @ (a * np.eye(n) + b * corr) @ q
            logdet, quad = np.linalg.slogdet(m)[1], projected @ np.linalg.solve(m, projected)
            if white_fixed is not None:
                loglik[i, j], white[i, j], drift[i, j] = -0.5 * (logdet + quad), a, b
            else:
                total = quad / dof
                loglik[i, j], white[i, j], drift[i, j] = -0.5 * (logdet + dof * np.log(total)), a * total, b * total
            ratio[i, j] = (drift[i, j] * (weights @ corr @ weights) + white[i, j] * ww) / (s2 * ww)
    i, j = np.unravel_index(np.argmax(loglik), loglik.shape)
    weight = np.exp(loglik - logsumexp(loglik))
    return PHI_GRID[i], white[i, j], drift[i, j], max(float((weight * ratio).sum()), 1.0)


@pytest.mark.parametrize("drift_sd,eval_variance", [(0.02, None), (0.01, None), (0.02, 0.01 ** 2)])
def test_reml_on_eigenvectors_is_the_dense_likelihood(drift_sd, eval_variance):
    rng = np.random.default_rng(11)
    x = np.linspace(500.0, 16000.0, 40)
    jac = jacobian(x, 0.3, 0.6, 2.0, 3000.0)
    residuals = rng.normal(0.0, 0.01, x.size) + ar1_drift(x.size, drift_sd, 0.9, rng)
    residuals -= jac @ np.linalg.lstsq(jac, residuals, rcond=None)[0]  # orthogonal to J, as at an interior optimum
    phi, white, drift, inflation = _dense_reml(jac, residuals, eval_variance)
    noise = estimate_residual_noise(jac, residuals, eval_variance)
    assert drift > 0  # a drift is found: phi is the likelihood's, not a tie's
    assert noise.phi == phi
    assert noise.white == pytest.approx(white, rel=1e-9)
    assert noise.drift == pytest.approx(drift, rel=1e-9)
    assert noise.inflation == pytest.approx(inflation, rel=1e-9)


def test_reml_without_drift_reads_phi_zero():
    """Independent residuals: where the likelihood is highest at no drift, every phi gives that covariance,
    and the estimate says phi 0 rather than whichever phi the rounding favours."""
    rng = np.random.default_rng(2)
    x = np.linspace(500.0, 16000.0, 60)
    jac = jacobian(x, 0.3, 0.6, 2.0, 3000.0)
    estimates = [estimate_residual_noise(jac, rng.normal(0.0, 0.01, x.size)) for _ in range(20)]
    without = [noise.phi for noise in estimates if noise.drift == 0.0]
    assert len(without) >= 5 and set(without) == {0.0}
