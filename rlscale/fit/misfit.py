"""Is a fitted run's curve a sigmoid? Eq. 1 against two other shapes, under the run's own residual noise.

A run is fitted with Eq. 1 whatever its shape; A and B then mean something only if the curve is one. The
residuals of the fit are compared, under the residual covariance the fit estimated (white noise plus an
AR(1) drift, rlscale.fit.correlated: ``noise_white_sd``, ``noise_drift_sd``, ``noise_phi``), with

- a step change (a curriculum switch, a restart on other data): Eq. 1 plus a level shift from an unknown
  eval k on. Residuals, the fit's Jacobian and the shift regressors are whitened with the Cholesky factor of
  the covariance, the Jacobian projected out (the linearised fit: the shift's likelihood-ratio statistic with
  A, B, C_mid refitted to first order), and for each k with at least MIN_SEGMENT evals on either side the
  F statistic of the shift on 1 and n - 4 degrees of freedom (the scale of the covariance is estimated
  alongside, only its shape is taken from the fit). ``misfit_p`` is the smallest of their p-values times the
  number of change points searched (Bonferroni: the max over change points is thereby never
  anti-conservative, whatever their correlation); below STEP_ALPHA the run has a step change near the first
  eval of the shifted level. The covariance is the fit's own, estimated on the residuals of Eq. 1: a step
  left in them partly reads as slow drift, which costs power but keeps the test calibrated (re-estimating the
  covariance with the best shift as a fixed effect found more steps in binomial evals, but put 5 % of
  drifting sigmoid runs below 0.001, and costs a second noise estimate). Below a dozen evals the fit takes
  the residuals as independent, while a drift of correlation 0.9 between evals makes them not, hence
  STEP_ALPHA 0.01 rather than 0.05 (at 0.05, 15 % of such sigmoid runs of 9 evals were noted).
- the App. A.4 power law R = A - D/C^B, fitted on the same window (rlscale.fit.powerlaw): ``misfit_llr`` is
  the log-likelihood of the power law's residuals minus the sigmoid's, Gaussian with the same covariance
  shape, the scale profiled out ((n/2) log(Q_sigmoid / Q_power), Q the whitened sums of squares). Both forms
  have three parameters, so no penalty is due; a power law better by more than POWER_LLR (a likelihood
  ratio of e^POWER_LLR) says the curve keeps climbing as no sigmoid in the search box does. Eq. 1 with C_mid
  below the window is itself a power law in its tail, so a power law that stays below 1 is fitted as well
  by the sigmoid and gets no note (its A is then often at the edge of its range, rlscale.fit.one_run).

The constants were set on synthetic runs with known truth (bench/misfit_bench.py, results in
bench/results/misfit_bench.md): sigmoid runs with an AR(1) drift of sd 0.005-0.02 (phi 0.9), binomial and
clustered evals, 9, 30 and 64 evals, so that at most 5 % of them get a note. Nothing is simulated at fit time;
the test costs one Cholesky factor and two triangular solves per run.

A run of fewer than MIN_POINTS fitted points, or fitted without a residual covariance, is not tested.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.stats import f as f_dist

from rlscale.fit.correlated import ResidualNoise, jacobian
from rlscale.fit.forms import N_PARAMS, power_law, sigmoid
from rlscale.fit.results import RunFit

MIN_POINTS = 8
MIN_SEGMENT = 3
STEP_ALPHA = 0.01
POWER_LLR = 3.0
POWER_LAW_BETTER = "curve not sigmoid: power law fits better"
STEP_CHANGE = "step change near C = "


@dataclass(frozen=True)
class Misfit:
    """The outcome of the test on one run: ``reason`` ("" when the curve passes; a step is named before the
    power law), the step test's Bonferroni p-value ``p``, the power law's log-likelihood ratio over the
    sigmoid ``llr``; None where not tested."""

    reason: str = ""
    p: Optional[float] = None
    llr: Optional[float] = None


def assess_misfit(x: np.ndarray, y: np.ndarray, run: RunFit) -> Misfit:
    """The misfit test (module docstring) on the fitted points ``x``, ``y`` of a fitted ``run`` (its Eq. 1
    parameters, residual noise and power law set)."""
    noise = _noise(run)
    if x.size < MIN_POINTS or noise is None or None in (run.A, run.B, run.C_mid, run.R0):
        return Misfit()
    jac = jacobian(x, run.R0, run.A, run.B, run.C_mid)
    residuals = y - sigmoid(x, run.R0, run.A, run.B, run.C_mid)
    if not np.isfinite(jac).all() or not np.isfinite(residuals).all():
        return Misfit()
    factor = _whitener(noise, x.size)
    k, p = _step_test(jac, residuals, factor)
    llr = _power_llr(x, y, residuals, run, factor)
    reason = ""
    if p < STEP_ALPHA:
        reason = f"{STEP_CHANGE}{x[k]:.4g}"
    elif llr is not None and llr > POWER_LLR:
        reason = POWER_LAW_BETTER
    return Misfit(reason=reason, p=p, llr=llr)


def misfit_note(run: RunFit) -> str:
    """What a comparison says of a run ranked on its A although its curve is not a sigmoid: "seed 2's curve
    is not a sigmoid (step change near C = 1.1e+04)", or "" when the run passed or was not tested."""
    if not run.misfit:
        return ""
    who = f"seed {run.seed}'s" if run.seed is not None else f"{run.variant}'s"
    return f"{who} curve is not a sigmoid ({run.misfit})"


def _noise(run: RunFit) -> Optional[ResidualNoise]:
    if run.noise_white_sd is None or run.noise_drift_sd is None or run.noise_phi is None:
        return None
    if run.noise_white_sd <= 0 and run.noise_drift_sd <= 0:
        return None
    return ResidualNoise(white=run.noise_white_sd ** 2, drift=run.noise_drift_sd ** 2, phi=run.noise_phi,
                         inflation=1.0)


def _whitener(noise: ResidualNoise, n: int) -> np.ndarray:
    """The lower Cholesky factor of the residual covariance (a small ridge keeps it positive definite)."""
    cov = noise.covariance(n)
    return cholesky(cov + 1e-12 * np.trace(cov) / n * np.eye(n), lower=True)


def _steps(n: int) -> np.ndarray:
    """The level-shift regressors, one column per change point k (1 from eval k on)."""
    ks = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    return (np.arange(n)[:, None] >= ks[None, :]).astype(float)


def _step_test(jac: np.ndarray, residuals: np.ndarray, factor: np.ndarray) -> Tuple[int, float]:
    """The change point k of the strongest shift and the Bonferroni p-value (module docstring); ``factor``: the
    covariance's Cholesky factor."""
    n = residuals.size
    steps = _steps(n)
    white = solve_triangular(factor, np.column_stack([residuals, jac, steps]), lower=True)
    basis, _ = np.linalg.qr(white[:, 1:1 + N_PARAMS])
    white -= basis @ (basis.T @ white)
    e, s = white[:, 0], white[:, 1 + N_PARAMS:]
    num = (s.T @ e) ** 2 / np.maximum(np.einsum("ij,ij->j", s, s), 1e-300)
    dof = n - N_PARAMS - 1
    stat = num / np.maximum(float(e @ e) - num, 1e-300) * dof
    best = int(np.argmax(stat))
    p = min(1.0, steps.shape[1] * float(f_dist.sf(stat[best], 1, dof)))
    return MIN_SEGMENT + best, p


def _power_llr(x: np.ndarray, y: np.ndarray, residuals: np.ndarray, run: RunFit,
               factor: np.ndarray) -> Optional[float]:
    """(n/2) log(Q_sigmoid / Q_power) under the fit's covariance shape (module docstring)."""
    law = run.power_law
    if law is None or None in (law.A, law.D, law.B):
        return None
    other = y - power_law(x, law.A, law.D, law.B)
    if not np.isfinite(other).all():
        return None
    white = solve_triangular(factor, np.column_stack([residuals, other]), lower=True)
    q = np.einsum("ij,ij->j", white, white)
    if q[1] <= 0:
        return None
    return 0.5 * x.size * math.log(q[0] / q[1])
