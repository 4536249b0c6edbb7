"""Prediction intervals for a run's reward beyond its fitted window, and two baselines checked the same way.

Section 4 and 5 of the paper read a curve fitted on part of the compute at a larger compute; rlscale checks
that with ``--fit-until`` against the mean of the last k evals (rlscale.fit.one_run, EXTRAP_EVALS) and predicts
with ``--predict-at``. The interval is about the observed value, not the curve: it is a prediction interval.
Its parts:

(a) the parameters of the fitted curve, (b) the drift of the reward around the curve carried forward, and
(c) the eval noise of the observed value, drawn together from one model: the residual covariance of the fit
(rlscale.fit.correlated: white noise plus a stationary AR(1) drift, one lag = one eval) extended over the
held-out evals. With ``--n-boot N`` N resamples of the window are drawn from it jointly with the held-out evals,
each window refitted (the fast method, warm-started, as rlscale.fit.bootstrap), so the spread of the error
"prediction of the refit minus held-out observation" holds the parameters' uncertainty, how far the drift at the
cut persists to C, and the held-out evals' own noise; with ``--n-boot 0`` the same error is propagated
linearly (the delta method, the fit's Jacobian). The error is then conditioned on the mean of the fit's last
LAST_RESIDUALS residuals, by the regression the same draws give: what the last residuals say about where the
reward sits against the curve, with its weight falling as phi^h with the horizon h, and the variance growing
toward the stationary drift variance. The held-out evals' white variance is their own ``<y>_se``^2 when the
run logs it, else the fit's white variance.

Drift on short windows. Below MIN_DEGREES residual directions rlscale.fit.correlated estimates no correlation
(an AR(1) fit to fewer is noise) and the residuals are taken as independent: right for A's interval of the
window, too narrow for a forecast, where a drift that persists past the cut moves the observation. Such a fit
is given the conservative drift (``rule`` "conservative"): SHORT_PHI = 0.9 with the whole residual variance s^2 (raised to the pooled
level where rlscale.fit.pooled did) as drift variance, on top of the white noise (the eval SE^2 when logged,
else s^2 again): the residual scatter is read as drift as slow as that of the REML fits of long real runs
(phi 0.8-0.98), so the noise is counted at most twice, never missed. A longer fit whose REML drift is below the
same level keeps its estimate (its data measured it), unless the estimate is no drift at all: the REML maximum
settles on "no drift" on many runs that drift (rlscale.fit.correlated: 8-9 of 50 synthetic runs with a drift of
sd 0.02 and correlation 0.95 between evals, fitted on 12 residual directions); such a fit gets the
conservative drift too.

(d) The form. Eq. 1 is an assumption; App. A.4's power law R = A - D/C^B fitted on the same window is the
paper's alternative, and past the window the two can part by more than the noise (a run whose tail keeps
climbing). With no way to tell them apart from the window, the interval is the central ``level`` interval of
an equal mixture of the two forms' predictive distributions (each with the spread above, centred on its own
prediction plus the same carried drift): where the forms agree it is the sigmoid's, where they part it spans
both. No constant is tuned: the weights are equal, the spread is the model's.

Baselines, on the same held-out evals (RunFit.extrap_*): carry-forward (the mean of the last
LAST_RESIDUALS fitted evals, with the interval of the same noise model: it assumes no further rise) and the
power law (PowerLawFit.extrap_predicted). The best of the three is the one nearest the observation; it is
"within noise" of the runner-up when the observation lies within z x its eval noise (sqrt(SE^2 / k)) of the
two predictions' midpoint, so a fresh draw of the held-out evals could swap them.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from rlscale.fit.correlated import MIN_DEGREES, ResidualNoise, jacobian
from rlscale.fit.curves import Curve
from rlscale.fit.fast import fit_batch
from rlscale.fit.forms import N_PARAMS, SigmoidParams, power_law, sigmoid
from rlscale.fit.results import FitSettings, RunFit
from rlscale.fit.space import SearchSpace
from rlscale.fit.window import Window

LAST_RESIDUALS = 3
SHORT_PHI = 0.9
MAX_DRAWS = 2048  # joint draws of a forecast: enough for its three moments, whatever --n-boot
SIGMOID, CARRY_FORWARD, POWER_LAW = "sigmoid", "carry-forward", "power law"
METHODS = (SIGMOID, CARRY_FORWARD, POWER_LAW)
WITHIN_NOISE = "within noise"


@dataclass(frozen=True)
class ForecastNoise:
    """The covariance a forecast draws from: white and AR(1) drift variance, lag-one correlation; ``rule``
    "estimated" (the fit's REML estimate) or "conservative" (the drift of a short fit or of one whose estimate found none, module
    docstring)."""

    white: float
    drift: float
    phi: float
    rule: str

    def covariance(self, positions: np.ndarray, white: np.ndarray) -> np.ndarray:
        """At eval ``positions`` (one lag = one eval), with each one's own white variance."""
        lags = np.abs(np.subtract.outer(positions, positions))
        return np.diag(white) + self.drift * self.phi ** lags


def forecast_noise(noise: ResidualNoise, n_points: int, eval_variance: Optional[float]) -> ForecastNoise:
    """The forecast's covariance for a fit of ``n_points`` points whose residual covariance is ``noise``
    (``eval_variance``: the squared eval SE, when logged)."""
    if n_points - N_PARAMS >= MIN_DEGREES and noise.drift > 0:
        return ForecastNoise(noise.white, noise.drift, noise.phi, "estimated")
    white = eval_variance if eval_variance is not None and eval_variance > 0 else noise.white
    return ForecastNoise(white, noise.white + noise.drift, SHORT_PHI, "conservative")


@dataclass(frozen=True)
class Target:
    """What is predicted: the mean reward of evals at compute ``x``, at ``lags`` evals past the last fitted
    point, each with white variance ``white``; ``form``: the power law's prediction of the same mean (None
    when it has none)."""

    x: np.ndarray
    lags: np.ndarray
    white: np.ndarray
    form: Optional[float] = None


@dataclass(frozen=True)
class Forecast:
    """A prediction ``value`` (the fitted curve's mean over the target), the ``drift`` carried forward to it,
    ``sd`` the spread of the error (parameters, drift, eval noise) and [``lo``, ``hi``] the prediction interval
    at the level asked (the two-form mixture when ``form`` is given)."""

    value: float
    drift: float
    sd: float
    lo: float
    hi: float


def forecast(x: np.ndarray, y: np.ndarray, r0: float, params: SigmoidParams, space: SearchSpace,
             noise: ForecastNoise, targets: Sequence[Target], level: float, n_boot: int,
             rng: np.random.Generator) -> List[Forecast]:
    """The prediction interval of each target (module docstring): by ``n_boot`` joint draws refitted, or
    linearly when ``n_boot`` is 0."""
    n = x.size
    fitted = sigmoid(x, r0, params.A, params.B, params.C_mid)
    last = np.zeros(n)
    last[-min(LAST_RESIDUALS, n):] = 1.0 / min(LAST_RESIDUALS, n)
    observed_last = float(last @ (y - fitted))
    positions = np.concatenate([np.arange(n, dtype=float)] + [n - 1 + t.lags for t in targets])
    white = np.concatenate([np.full(n, noise.white)] + [t.white for t in targets])
    cov = noise.covariance(positions, white)
    moments = (_drawn_moments if n_boot > 0 else _linear_moments)(x, r0, params, space, cov, last, targets,
                                                                 n_boot, rng)
    z = float(norm.ppf((1 + level) / 2))
    out = []
    for t, (var_e, cov_er, var_r) in zip(targets, moments):
        value = float(np.mean(sigmoid(t.x, r0, params.A, params.B, params.C_mid)))
        beta = cov_er / var_r if var_r > 0 else 0.0
        drift = -beta * observed_last  # E[observation - prediction | last residuals]
        sd = float(np.sqrt(max(var_e - beta * cov_er, 0.0)))
        centres = [value + drift] + ([t.form + drift] if t.form is not None and np.isfinite(t.form) else [])
        lo, hi = _mixture_interval(centres, sd, level, z)
        out.append(Forecast(value=value, drift=drift, sd=sd, lo=lo, hi=hi))
    return out


def _linear_moments(x, r0, params, space, cov, last, targets, n_boot, rng) -> List[Tuple[float, float, float]]:
    """Var(error), Cov(error, mean last residual), Var(mean last residual) by the delta method."""
    n = x.size
    jac = jacobian(x, r0, params.A, params.B, params.C_mid)
    solve = np.linalg.pinv(jac)  # (3, n): the parameters' response to the window's noise
    residual_of = (np.eye(n) - jac @ solve).T @ last
    b = np.concatenate([residual_of, np.zeros(cov.shape[0] - n)])
    out, start = [], n
    for t in targets:
        g = jacobian(t.x, r0, params.A, params.B, params.C_mid).mean(axis=0)
        a = np.zeros(cov.shape[0])
        a[:n] = solve.T @ g
        a[start:start + t.x.size] = -1.0 / t.x.size
        start += t.x.size
        out.append((float(a @ cov @ a), float(a @ cov @ b), float(b @ cov @ b)))
    return out


def _drawn_moments(x, r0, params, space, cov, last, targets, n_boot, rng) -> List[Tuple[float, float, float]]:
    """The same moments from ``n_boot`` joint draws, each window refitted (module docstring)."""
    n = x.size
    fitted = sigmoid(x, r0, params.A, params.B, params.C_mid)
    draws = rng.standard_normal((min(n_boot, MAX_DRAWS), cov.shape[0])) @ np.linalg.cholesky(cov + 1e-15 * np.eye(cov.shape[0])).T
    curves = fitted + draws[:, :n]
    refit = fit_batch(x, curves, r0, space, np.ones(curves.shape), start=(params.C_mid, params.B))
    a, b, c = (v[:, None] for v in (refit.A, refit.B, refit.C_mid))
    residual = (curves - sigmoid(x, r0, a, b, c)) @ last
    out, start = [], n
    for t in targets:
        truth = float(np.mean(sigmoid(t.x, r0, params.A, params.B, params.C_mid)))
        predicted = sigmoid(t.x, r0, a, b, c).mean(axis=1)
        error = predicted - (truth + draws[:, start:start + t.x.size].mean(axis=1))
        start += t.x.size
        moments = np.cov(np.stack([error, residual]))
        out.append((float(moments[0, 0]), float(moments[0, 1]), float(moments[1, 1])))
    return out


def _mixture_interval(centres: Sequence[float], sd: float, level: float, z: float) -> Tuple[float, float]:
    """The central ``level`` interval of an equal mixture of normals N(centre, sd^2)."""
    if sd <= 0:
        return float(min(centres)), float(max(centres))
    if len(centres) == 1 or np.ptp(centres) == 0:
        return centres[0] - z * sd, centres[0] + z * sd

    def cdf(v: float) -> float:
        return float(np.mean(norm.cdf((v - np.asarray(centres)) / sd)))

    lo_bound, hi_bound = min(centres) - (z + 1) * sd, max(centres) + (z + 1) * sd
    tail = (1 - level) / 2
    return (brentq(lambda v: cdf(v) - tail, lo_bound, hi_bound),
            brentq(lambda v: cdf(v) - (1 - tail), lo_bound, hi_bound))


@dataclass(frozen=True)
class Baseline:
    """Carry-forward: the mean of the last fitted evals, and its interval under the forecast's noise."""

    value: float
    lo: float
    hi: float


def carry_forward(y: np.ndarray, noise: ForecastNoise, target: Target, level: float) -> Baseline:
    """The mean of the last LAST_RESIDUALS fitted evals as the prediction of the target's mean; its interval
    counts the drift and white noise of both means under ``noise`` (no further rise)."""
    n, k = y.size, min(LAST_RESIDUALS, y.size)
    positions = np.concatenate([np.arange(n - k, n, dtype=float), n - 1 + target.lags])
    cov = noise.covariance(positions, np.concatenate([np.full(k, noise.white), target.white]))
    c = np.concatenate([np.full(k, 1.0 / k), np.full(target.x.size, -1.0 / target.x.size)])
    value = float(np.mean(y[-k:]))
    half = float(norm.ppf((1 + level) / 2)) * float(np.sqrt(max(c @ cov @ c, 0.0)))
    return Baseline(value, value - half, value + half)


@dataclass(frozen=True)
class Best:
    """The method nearest the observation, the runner-up, and whether the observation's eval noise resolves
    the two (``resolved``)."""

    method: str
    runner_up: Optional[str]
    resolved: bool

    def describe(self) -> str:
        if self.runner_up is None or self.resolved:
            return self.method
        return f"{self.method} ({self.runner_up} {WITHIN_NOISE})"


def best_method(observed: float, predictions: Dict[str, Optional[float]], observed_sd: float,
                level: float) -> Optional[Best]:
    """The best of ``predictions`` (method -> predicted value, None when it has none) against ``observed``
    (module docstring); None when no method predicted."""
    ranked = sorted(((abs(v - observed), METHODS.index(m), m, v) for m, v in predictions.items() if v is not None))
    if not ranked:
        return None
    if len(ranked) == 1:
        return Best(ranked[0][2], None, True)
    (_, _, first, p1), (_, _, second, p2) = ranked[:2]
    z = float(norm.ppf((1 + level) / 2))
    return Best(first, second, abs(observed - (p1 + p2) / 2) > z * observed_sd)


def best_text(run: RunFit) -> str:
    """A run's best method as printed (Best.describe), "" without one."""
    if not run.extrap_best:
        return ""
    return Best(run.extrap_best, run.extrap_runner_up or None, bool(run.extrap_best_resolved)).describe()


@dataclass(frozen=True)
class ForecastSummary:
    """A sweep's extrapolation check: ``n`` runs, ``covered`` of them inside the prediction interval, each
    method's median |error| (``errors``: method -> (median, runs)), the method of the lowest median and how
    many runs each method was best on, resolved beyond noise (``wins``)."""

    n: int
    covered: int
    level: float
    errors: Dict[str, Tuple[float, int]]
    best: str
    wins: Dict[str, int]

    def describe(self) -> str:
        errors = ", ".join(f"{m} {e:.3f}" + (f" ({k} runs)" if k != self.n else "")
                           for m, (e, k) in self.errors.items())
        wins = ", ".join(f"{m} {self.wins[m]}" for m in METHODS if m in self.errors)
        return (f"{self.level:.0%} prediction interval held the observed mean in {self.covered} of {self.n} runs; "
                f"median |error|: {errors}; best: {self.best} (runs best beyond noise: {wins})")


def summarize(runs: Sequence[RunFit], level: float) -> Optional[ForecastSummary]:
    """The summary over ``runs`` (RunFit) that have an extrapolation check with an interval; None if none."""
    checked = [r for r in runs if r.extrap_lo is not None and r.extrap_observed is not None]
    if not checked:
        return None
    per_method: Dict[str, List[float]] = {m: [] for m in METHODS}
    wins = {m: 0 for m in METHODS}
    for r in checked:
        for m, e in zip(METHODS, (r.extrap_abs_err, r.extrap_cf_abs_err,
                                  r.power_law.extrap_abs_err if r.power_law else None)):
            if e is not None:
                per_method[m].append(e)
        if r.extrap_best and r.extrap_best_resolved:
            wins[r.extrap_best] += 1
    errors = {m: (statistics.median(v), len(v)) for m, v in per_method.items() if v}
    best = min(errors, key=lambda m: (errors[m][0], METHODS.index(m)))
    covered = sum(r.extrap_lo <= r.extrap_observed <= r.extrap_hi for r in checked)
    return ForecastSummary(len(checked), covered, level, errors, best, wins)


def add_forecasts(run: RunFit, curve: Curve, window: Window, x: np.ndarray, y: np.ndarray, space: SearchSpace,
                  params: SigmoidParams, noise: Optional[ResidualNoise], settings: FitSettings,
                  rng: np.random.Generator) -> None:
    """The prediction intervals of a fitted run: of its extrapolation check (``extrap_lo``/``extrap_hi``, with
    the carry-forward baseline and the best method) and of its ``--predict-at`` predictions (``lo``/``hi``).
    Nothing without a residual covariance (a fit of too few points for an interval). ``rng``: the run's
    bootstrap generator, from which the forecast's own stream is spawned."""
    if noise is None:
        return
    eval_variance = run.eval_se ** 2 if run.eval_se else None
    model = forecast_noise(noise, x.size, eval_variance)
    default_white = eval_variance if eval_variance is not None else model.white
    spacing = float(np.median(np.diff(x))) if x.size > 1 else float(x[-1])
    targets = [Target(np.array([p.x]), np.array([max(0.0, (p.x - x[-1]) / spacing)]), np.array([default_white]),
                      _power_law_at(run, np.array([p.x]))) for p in run.predictions]
    check = _check_target(run, curve, window, x.size, default_white) if run.extrap_x is not None else None
    if check is not None:
        targets.append(check)
    if not targets:
        return
    stream = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0])
    results = forecast(x, y, run.R0, params, space, model, targets, settings.ci_level, settings.n_boot, stream)
    for p, f in zip(run.predictions, results):
        p.lo, p.hi = f.lo, f.hi
    if check is None:
        return
    f = results[-1]
    run.extrap_lo, run.extrap_hi, run.extrap_drift, run.extrap_noise_rule = f.lo, f.hi, f.drift, model.rule
    run.extrap_covered = f.lo <= run.extrap_observed <= f.hi
    base = carry_forward(y, model, check, settings.ci_level)
    run.extrap_cf_predicted, run.extrap_cf_lo, run.extrap_cf_hi = base.value, base.lo, base.hi
    run.extrap_cf_abs_err = abs(base.value - run.extrap_observed)
    best = best_method(run.extrap_observed, {SIGMOID: run.extrap_predicted, CARRY_FORWARD: base.value,
                                             POWER_LAW: run.extrap_pl_predicted},
                       float(np.sqrt(np.mean(check.white) / check.x.size)), settings.ci_level)
    if best is not None:
        run.extrap_best, run.extrap_runner_up, run.extrap_best_resolved = best.method, best.runner_up or "", \
            best.resolved


def _check_target(run: RunFit, curve: Curve, window: Window, n_fitted: int, default_white: float) -> Target:
    """The held-out evals of the extrapolation check (rlscale.fit.one_run, EXTRAP_EVALS): their compute, their lag
    in fitted points past the last fitted one (evals, scaled when the window was fitted as group means) and
    their own squared SE where logged."""
    t = curve.t if curve.t.size == curve.x.size else None
    inside, beyond = np.flatnonzero(window.mask(curve.x, t)), np.flatnonzero(window.beyond(curve.x, t))
    chosen = beyond[-(run.extrap_evals or 1):]
    lags = (chosen - inside[-1]) * n_fitted / inside.size
    se = curve.se[chosen] if curve.se.size == curve.x.size else np.full(chosen.size, np.nan)
    white = np.where(np.isfinite(se) & (se > 0), se ** 2, default_white)
    return Target(curve.x[chosen], lags.astype(float), white, run.extrap_pl_predicted)


def _power_law_at(run: RunFit, xs: np.ndarray) -> Optional[float]:
    law = run.power_law
    if law is None or law.A is None:
        return None
    return float(np.mean(power_law(xs, law.A, law.D, law.B)))
