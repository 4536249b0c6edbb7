"""Fit one run: Eq. 1 on its window, bootstrap intervals, extrapolation, predictions and the App. A.4 power
law side by side; then classify the result.

Status (RunFit.status) for a curve that loaded:
- ``too_few_points``: fewer than 3 points (A, B, C_mid) in [cutoff, fit_until];
- ``flat``: constant reward, or a fitted rise |A - R0| within 2 residual standard deviations (no
  measurable improvement: A, B and C_mid mean nothing);
- ``diverging``: the reward falls with compute (A below R0 by more than that);
- ``repaired``: fitted, after tolerating bad input (torn or duplicate metrics lines, dropped NaN/inf
  points, a missing or unreadable config.yaml); the message says what was repaired;
- ``pruned``: fitted, but the run was stopped early by its sweep's pruning (rlscale.sweep.prune): a
  partial curve, never a full run, so it is left out of every comparison (like any status but ok and
  repaired) while its fit stays in fits.json;
- ``ok`` otherwise, with notes (A or C_mid at the edge of the box, no point beyond ``fit_until``, ...).

Uncertainty. The residual covariance of the fit (white noise plus a drift that wanders from eval to eval,
rlscale.fit.correlated) is estimated first; a fit of fewer than a dozen evals has its residual variance
raised to its variant's pooled level (over its seeds) when it falls below it (``pooled_ratio``,
rlscale.fit.pooled). A's interval is the profile interval widened by that covariance (rlscale.fit.profile: the run's own residuals,
``A_se_within``), then by the eval set's shared offset in quadrature on each side (the offset moves the whole
curve, so it adds to A's error as a shift; clipped to A's range); B's, C_mid's and the predictions' come from
a bootstrap that redraws the same covariance (rlscale.fit.bootstrap). RunFit keeps the estimate
(``noise_phi``, ``noise_drift_sd``, ``noise_white_sd``, ``A_inflation``). Inside the profile, the offset was
amplified through the profile of a run that has not saturated and pushed its interval to the box edge (on
runs of 100 prompts with a drift of 0.02, 1 % were identified; bench/verdict_bench.py), while on runs of
6-9 evals it was left out altogether (the interval held the population's A in 60 % of such runs).

A identified (RunFit.A_identified). A fitted run's A is not identified, and the comparisons keep it out
of "highest A", of the fixed-A mean and of the top rank (rlscale.fit.compare), when
- its point estimate is at the edge of A's range (fast: [0, 1] or ``a_bounds``; paper: the A grid); or
- its interval reaches that edge, or reaches above A by more than the whole fitted rise A - R0
  (``A_interval_open``): the data put no bound on the ceiling there, or none tighter than "somewhere up to
  twice the rise seen so far" (a short window at the foot of a rise whose points happen to flatten); a
  variant of several seeds is still compared when at most half its seeds are so (rlscale.fit.compare),
  since the comparison rests on the spread of the seeds' estimates, not on each run's interval; or
- the run ends before its curve bends: at the last fitted point the fitted curve has made less than
  BEND_FRACTION (half) of its rise R0 -> A, i.e. the last point is below C_mid, so A is an extrapolation of
  the lower half of a sigmoid (the paper's LOO runs end at ~97 % of theirs).
A run that has bent but not flattened keeps its A and its interval: the profile interval of such a run
reaches as far up as its points allow, so A is reported with the uncertainty an unsaturated run has, rather
than being kept only when its draw happened to bend early.

- the data do not place the bend before the last PAST_BEND_SHARE (half) of the fitted evals, nor before the
  last MIN_DEGREES: some Eq. 1 curve whose C_mid lies at or after that eval fits within the bound of A's
  interval (rlscale.fit.profile.bend_excluded_from). A is measured by the evals past the bend; a bend that may
  sit in the last few leaves them too few to tell a plateau from a drift that went down there. Runs stopped at
  30-50 % of their rise (drift 0.01, correlation 0.9, 400 samples, 16-64 evals) whose last evals the drift
  flattened had closed intervals around a low A (24 of 9,000 were called identified, 2 of them holding the
  true A), none with this rule (with the last quarter or third of the evals instead of half, 2 stayed
  identified, both wrong; with the point estimate's bend alone, all 24). It costs runs to 16k GPU-hours 0-13 %
  of their identified share, and runs stopped at 79 % of their rise, whose bend the data place only loosely,
  all of theirs (15 of 200 were identified; bench/verdict_bench.md).

- the run has too few fitted evals to tell a drift of its reward from a plateau: fewer than MIN_DEGREES
  residual degrees of freedom (rlscale.fit.correlated: no correlation is estimated below them), where a run
  stopped at half its rise whose last evals the drift pushed down fits a low A with a closed interval (11 of
  200 such runs were called identified, none of whose intervals held the true A).

Every fit's inflation of A's variance is at least the drift floor of rlscale.fit.correlated.prior_inflation
(a drift the residuals cannot rule out), for the same reason at any length.

A run of fewer than MIN_INTERVAL_POINTS (five) fitted points gets no interval and its A is not identified:
with three the curve passes through every point and there is no residual left to measure the noise (the
interval would be the search's own precision), with four the one residual degree of freedom puts the
likelihood-ratio bound at 161 times the residual variance.

Shape (``misfit``, ``misfit_p``, ``misfit_llr``): after the power law is fitted, the residuals are tested for a
step change and compared with the power law's under the fit's own residual covariance (rlscale.fit.misfit); a
run that fails keeps its status, the field says why.

Extrapolation check (``--fit-until``): the fitted curve against the mean of the last EXTRAP_EVALS (three)
evals beyond ``fit_until`` (one eval's noise is about as large as the errors in question), the prediction
averaged over the same evals; its prediction interval, the carry-forward baseline and the best of the three
methods, like the intervals of the ``--predict-at`` predictions, come from rlscale.fit.forecast.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import replace
from typing import List, Optional, Tuple

import numpy as np
from scipy.stats import norm

from rlscale.fit.binning import binned
from rlscale.fit.bootstrap import bootstrap_ci, bootstrap_fits
from rlscale.fit.correlated import MIN_DEGREES, ResidualNoise, estimate_residual_noise, jacobian, prior_inflation
from rlscale.fit.curves import Curve
from rlscale.fit.fast import BatchFit, fit_fast
from rlscale.fit.forecast import add_forecasts
from rlscale.fit.forms import N_PARAMS, SigmoidParams, power_law, sigmoid
from rlscale.fit.methods import fitter
from rlscale.fit.misfit import assess_misfit
from rlscale.fit.paper import fit_paper
from rlscale.fit.powerlaw import fit_power_law
from rlscale.fit.profile import bend_excluded_from, profile_interval_a
from rlscale.fit.results import FitSettings, PowerLawFit, Prediction, RunFit
from rlscale.fit.space import SearchSpace, search_space
from rlscale.fit.window import Window, fit_window

MIN_INTERVAL_POINTS = N_PARAMS + 2
FLAT_SIGMAS = 2.0
BEND_FRACTION = 0.5
EXTRAP_EVALS = 3
INTERVAL_OPEN = "A's interval reaches"
TOO_FEW_EVALS = "too few to tell a drift of the reward from a plateau"
PAST_BEND_SHARE = 0.5
LATE_BEND = "the data do not place its bend before the last"


def fit_curve(curve: Curve, settings: FitSettings, pooled_ratio: Optional[float] = None) -> RunFit:
    """The RunFit of one curve; every outcome is a status, nothing raises for bad data. ``pooled_ratio``: its
    variant's pooled ratio of residual variance to squared eval SE (rlscale.fit.pooled), the floor of a short
    fit's residual variance."""
    run = RunFit(sweep=curve.sweep, variant=curve.variant, seed=curve.seed, run_path=curve.run_path,
                 x=settings.x, points_x=curve.x.tolist(), points_y=curve.y.tolist(), points_t=curve.t.tolist(),
                 t_axis=curve.t_axis)
    notes = list(curve.notes)
    if curve.status != "ok":
        return _finish(run, curve.status, [curve.message] + notes)
    run.R0 = float(curve.y[0]) if settings.r0 is None else settings.r0
    if settings.r0 is None and curve.x[0] > 0:
        notes.append(f"no eval at x=0: R0 from the first eval (x={curve.x[0]:.4g})")
    x, y, window = window_points(run, settings)
    run.cutoff, run.cutoff_rule, run.fit_until, run.n_points = window.cutoff, window.rule, window.fit_until, x.size
    in_window = _mask(curve, window)
    se = curve.se[in_window]
    if in_window.sum() > x.size:
        notes.append(f"{in_window.sum()} evals in the window, fitted as the means of {x.size} groups of consecutive "
                     "evals (rlscale.fit.binning)")
    run.eval_se, run.eval_samples = _median(se), _median(curve.samples)
    run.eval_prompts = _median(curve.prompts)
    if x.size < N_PARAMS:
        return _finish(run, "too_few_points", [f"{x.size} point(s) in the fit window, need >= {N_PARAMS}"] + notes)
    if np.ptp(np.append(y, run.R0)) == 0:
        return _finish(run, "flat", [f"constant reward {run.R0:.4g}"] + notes)
    space = search_space(settings, window)
    params = fitter(settings.method)(x, y, run.R0, space)
    run.A, run.B, run.C_mid, run.sse = params.A, params.B, params.C_mid, params.sse
    sst = float(np.sum((y - y.mean()) ** 2))
    run.r2 = 1 - params.sse / sst if sst > 0 else None
    status, verdict = _classify(params, run.R0, x.size)
    if status != "ok":
        return _finish(run, status, [verdict] + notes)
    notes += _edge_notes(params, space)
    eval_variance = run.eval_se ** 2 if run.eval_se else None
    floor = pooled_ratio * eval_variance if pooled_ratio is not None and eval_variance is not None else 0.0
    within = _add_uncertainty(run, x, y, space, params, settings, eval_variance, floor)
    own = params.sse / max(x.size - N_PARAMS, 1)
    if x.size - N_PARAMS < MIN_DEGREES and own > 0 and floor > own:
        notes.append(f"residual variance of {x.size - N_PARAMS} degrees of freedom raised to the variant's pooled "
                     f"level (x{floor / own:.2g}; rlscale.fit.pooled)")
    run.A_identified_reason = _unidentified(run, x, y, space, within, settings.ci_level)
    run.A_identified = not run.A_identified_reason
    run.A_interval_open = run.A_identified_reason.startswith(INTERVAL_OPEN)
    _add_extrapolation(run, curve, window, notes)
    run.power_law = _power_law(x, y, run, settings)
    add_forecasts(run, curve, window, x, y, space, params, fitted_noise(run), settings,
                  bootstrap_rng(run, settings))
    misfit = assess_misfit(x, y, run)
    run.misfit, run.misfit_p, run.misfit_llr = misfit.reason, misfit.p, misfit.llr
    if curve.pruned:
        return _finish(run, "pruned", [f"pruned by its sweep at x={curve.x[-1]:.4g}: partial curve"] + notes)
    return _finish(run, "repaired" if curve.repaired else "ok", notes)


def window_points(run: RunFit, settings: FitSettings) -> Tuple[np.ndarray, np.ndarray, Window]:
    """The points of ``run`` that are fitted (group means beyond MAX_FIT_POINTS, rlscale.fit.binning), and its
    window (decided on ``points_t`` when present)."""
    x, y = np.asarray(run.points_x, dtype=float), np.asarray(run.points_y, dtype=float)
    t = np.asarray(run.points_t, dtype=float) if len(run.points_t) == x.size else None
    window = fit_window(x, settings, t)
    mask = window.mask(x, t)
    return (*binned(x[mask], y[mask]), window)


def _mask(curve: Curve, window: Window) -> np.ndarray:
    return window.mask(curve.x, curve.t if curve.t.size == curve.x.size else None)


def _median(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None


def refit_with_a(run: RunFit, a: float, settings: FitSettings) -> SigmoidParams:
    """Refit an ok run's B and C_mid with A held at ``a`` (Section 4's fixed-A comparison): the paper's
    grid over C_mid with ``--method paper``, else the fast method warm-started at the run's free fit."""
    x, y, window = window_points(run, settings)
    space = search_space(settings, window).with_fixed_a(a)
    if settings.method == "paper":
        return fit_paper(x, y, run.R0, space)
    return fit_fast(x, y, run.R0, space, start=(run.C_mid, run.B))


def bootstrap_refits(run: RunFit, settings: FitSettings) -> Optional[BatchFit]:
    """The refitted resamples behind the run's own intervals: same seed, same points, and the residual covariance
    those intervals used (the eval variance and the variant's pooled floor included, ``fitted_noise``). None when
    the run has no intervals (fewer than MIN_INTERVAL_POINTS points)."""
    noise = fitted_noise(run)
    if noise is None:
        return None
    x, _, window = window_points(run, settings)
    return bootstrap_fits(x, run.R0, search_space(settings, window), free_params(run), noise, settings.n_boot,
                          bootstrap_rng(run, settings))


def fitted_noise(run: RunFit) -> Optional[ResidualNoise]:
    """The residual covariance the run's intervals were drawn from, as its fit recorded it (``noise_*``,
    ``A_inflation``); None for a run fitted without intervals."""
    if run.noise_white_sd is None or run.noise_drift_sd is None or run.noise_phi is None:
        return None
    return ResidualNoise(white=run.noise_white_sd ** 2, drift=run.noise_drift_sd ** 2, phi=run.noise_phi,
                         inflation=run.A_inflation or 1.0)


def residual_noise(x: np.ndarray, y: np.ndarray, r0: float, point: SigmoidParams,
                   eval_variance: Optional[float] = None, white_floor: float = 0.0) -> ResidualNoise:
    """The residual covariance of a fit (rlscale.fit.correlated)."""
    fitted = sigmoid(x, r0, point.A, point.B, point.C_mid)
    jac = jacobian(x, r0, point.A, point.B, point.C_mid)
    noise = estimate_residual_noise(jac, y - fitted, eval_variance, white_floor)
    return replace(noise, inflation=max(noise.inflation, prior_inflation(jac)))


def free_params(run: RunFit) -> SigmoidParams:
    """The run's own (free) Eq. 1 fit."""
    return SigmoidParams(A=run.A, B=run.B, C_mid=run.C_mid, sse=run.sse)


def bootstrap_rng(run: RunFit, settings: FitSettings) -> np.random.Generator:
    """The bootstrap generator of a run: seeded by --seed and the run's points (not its name), so every draw is
    reproducible and the same points get the same intervals in any folder."""
    points = np.ascontiguousarray([run.points_x, run.points_y], dtype=np.float64)
    return np.random.default_rng([settings.seed, zlib.crc32(points.tobytes())])


def _classify(params: SigmoidParams, r0: float, n: int) -> Tuple[str, str]:
    sigma = math.sqrt(params.sse / max(n - N_PARAMS, 1))
    gain = params.A - r0
    if gain < -FLAT_SIGMAS * sigma:
        return "diverging", f"reward falls with compute: A {params.A:.3f} < R0 {r0:.3f}"
    if abs(gain) <= FLAT_SIGMAS * sigma:
        return "flat", f"no rise: |A - R0| = {abs(gain):.3g} <= {FLAT_SIGMAS:g} x residual std {sigma:.3g}"
    return "ok", ""


def _edge_notes(params: SigmoidParams, space: SearchSpace) -> List[str]:
    notes = []
    if np.isclose(params.A, space.a_lo) or np.isclose(params.A, space.a_hi):
        notes.append(f"A at the edge of its range [{space.a_lo:g}, {space.a_hi:g}]")
    if np.isclose(params.C_mid, space.c_hi, rtol=1e-6):
        notes.append("C_mid at the top of its range: the curve has not bent yet, A is an extrapolation")
    elif np.isclose(params.C_mid, space.c_lo, rtol=1e-6):
        notes.append("C_mid at the bottom of its range: the rise ends before the cutoff")
    return notes


def _unidentified(run: RunFit, x: np.ndarray, y: np.ndarray, space: SearchSpace,
                  within: Optional[Tuple[float, float]], level: float) -> str:
    """Why A is not identified (module docstring), or "" when it is; a reason that starts with INTERVAL_OPEN
    means only the interval of the run's own residuals, ``within``, reaches the edge (the point estimate is
    inside and the curve has bent)."""

    def at_edge(v: float) -> bool:
        return bool(np.isclose(v, space.a_lo, atol=1e-6) or np.isclose(v, space.a_hi, atol=1e-6))

    if within is None:
        return (f"{x.size} points in the fit window: too few to measure the noise (an interval needs "
                f">= {MIN_INTERVAL_POINTS})")
    if at_edge(run.A):
        return f"A at the edge of its range [{space.a_lo:g}, {space.a_hi:g}]"
    if x.size - N_PARAMS < MIN_DEGREES:
        return f"{x.size} fitted evals: {TOO_FEW_EVALS} (needs >= {MIN_DEGREES + N_PARAMS})"
    reached = float(sigmoid(x[-1], 0.0, 1.0, run.B, run.C_mid))
    if reached < BEND_FRACTION:
        return (f"the run ends before its curve bends: {reached:.0%} of the rise at the last fitted point "
                f"(C_mid {run.C_mid:.4g} > {x[-1]:.4g})")
    if any(at_edge(v) for v in within):
        return f"{INTERVAL_OPEN} the edge of its range [{space.a_lo:g}, {space.a_hi:g}]"
    if within[1] - run.A > abs(run.A - run.R0):
        return (f"{INTERVAL_OPEN} past twice the fitted rise (A - R0 = {run.A - run.R0:.3g}, the residuals' "
                f"interval ends at {within[1]:.3g})")
    past = max(MIN_DEGREES, math.ceil(PAST_BEND_SHARE * x.size))
    if not bend_excluded_from(x, y, run.R0, space, free_params(run), run.A_inflation or 1.0, level, x[-past - 1]):
        return (f"{LATE_BEND} {past} of its {x.size} fitted evals (a curve that bends after x={x[-past - 1]:.4g} "
                "fits within the bound of A's interval)")
    return ""


def _add_uncertainty(run: RunFit, x: np.ndarray, y: np.ndarray, space: SearchSpace, params: SigmoidParams,
                     settings: FitSettings, eval_variance: Optional[float],
                     white_floor: float) -> Optional[Tuple[float, float]]:
    """The residual covariance, A's interval, bootstrap intervals (seeded per run) and the predictions at
    ``settings.predict_at``; returns A's interval from the run's own residuals (module docstring), None (and no
    interval) below MIN_INTERVAL_POINTS points."""
    if x.size < MIN_INTERVAL_POINTS:
        _add_predictions(run, settings, [(None, None)] * len(settings.predict_at))
        return None
    noise = residual_noise(x, y, run.R0, params, eval_variance, white_floor)
    run.noise_phi, run.A_inflation = noise.phi, noise.inflation
    run.noise_drift_sd, run.noise_white_sd = math.sqrt(noise.drift), math.sqrt(noise.white)
    within = profile_interval_a(x, y, run.R0, space, params, noise.inflation, settings.ci_level)
    z = float(norm.ppf((1 + settings.ci_level) / 2))
    offset = z * math.sqrt(noise.shared)
    run.A_lo = max(space.a_lo, params.A - math.hypot(params.A - within[0], offset))
    run.A_hi = min(space.a_hi, params.A + math.hypot(within[1] - params.A, offset))
    run.A_se, run.A_se_within = (run.A_hi - run.A_lo) / (2 * z), (within[1] - within[0]) / (2 * z)
    intervals: List[Tuple[Optional[float], Optional[float]]] = [(None, None)] * len(settings.predict_at)
    if settings.n_boot > 0:
        ci = bootstrap_ci(x, run.R0, space, params, noise, [], settings.n_boot, settings.ci_level,
                          bootstrap_rng(run, settings))
        (run.B_lo, run.B_hi), (run.C_mid_lo, run.C_mid_hi) = ci.B, ci.C_mid
    _add_predictions(run, settings, intervals)
    return within


def _add_predictions(run: RunFit, settings: FitSettings,
                     intervals: List[Tuple[Optional[float], Optional[float]]]) -> None:
    """The fitted curve at ``settings.predict_at`` and the observed reward there (their prediction intervals:
    rlscale.fit.forecast)."""
    xs = np.asarray(run.points_x)
    for c, (lo, hi) in zip(settings.predict_at, intervals):
        observed = float(np.interp(c, xs, run.points_y)) if xs[0] <= c <= xs[-1] else None
        run.predictions.append(Prediction(x=c, y=float(sigmoid(c, run.R0, run.A, run.B, run.C_mid)), lo=lo, hi=hi,
                                          observed=observed))


def _add_extrapolation(run: RunFit, curve: Curve, window: Window, notes: List[str]) -> None:
    """Predicted vs observed reward over the last EXTRAP_EVALS evals beyond ``fit_until`` (module docstring)."""
    if run.fit_until is None:
        return
    beyond = window.beyond(curve.x, curve.t if curve.t.size == curve.x.size else None)
    if not beyond.any():
        notes.append("no eval beyond fit_until to check the extrapolation")
        return
    xs, ys = curve.x[beyond][-EXTRAP_EVALS:], curve.y[beyond][-EXTRAP_EVALS:]
    run.extrap_x, run.extrap_evals, run.extrap_observed = float(xs[-1]), int(xs.size), float(np.mean(ys))
    run.extrap_predicted = float(np.mean(sigmoid(xs, run.R0, run.A, run.B, run.C_mid)))
    run.extrap_abs_err = abs(run.extrap_predicted - run.extrap_observed)


def _extrapolated_x(run: RunFit) -> np.ndarray:
    """The evals the extrapolation check averages over."""
    xs = np.asarray(run.points_x)
    return xs[xs > 0][-(run.extrap_evals or 1):]


def _power_law(x: np.ndarray, y: np.ndarray, run: RunFit, settings: FitSettings) -> PowerLawFit:
    fit = fit_power_law(x, y, settings.a_bounds)
    if run.extrap_x is not None:
        run.extrap_pl_predicted = float(np.mean(power_law(_extrapolated_x(run), fit.A, fit.D, fit.B)))
        fit.extrap_abs_err = abs(run.extrap_pl_predicted - run.extrap_observed)
    if np.isclose(fit.A, settings.a_bounds[1]):
        fit.message = f"A at the top of its range ({settings.a_bounds[1]:g})"
    return fit


def _finish(run: RunFit, status: str, parts: List[str]) -> RunFit:
    run.status = status
    run.message = "; ".join(p for p in parts if p)
    return run
