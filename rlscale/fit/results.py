"""What ``rlscale fit`` produces and ``rlscale report`` reads (fits.json, fits.csv, comparison.csv).

Parameters follow Eq. 1 of the paper: R_C = R0 + (A - R0) / (1 + (C_mid / C)^B).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
from scipy.stats import t as student_t

FITS_JSON = "fits.json"
FITS_CSV = "fits.csv"
COMPARISON_CSV = "comparison.csv"
# Statuses of runs whose fit is usable: "repaired" = fitted after tolerating bad input (a torn last line,
# duplicate steps after a resume, dropped NaN/inf points, a missing or unreadable config.yaml).
FITTED_STATUSES = ("ok", "repaired")

# x units a fit can use. gpu_hours and core_hours are measured (wall time x devices, or CPU core-seconds):
# they move with machine load. flops, samples, tokens and step are counted, so identical runs give identical x.
X_UNITS = ("gpu_hours", "core_hours", "flops", "samples", "tokens", "step")
MEASURED_UNITS = ("gpu_hours", "core_hours")
X_LABELS = {"gpu_hours": "GPU-hours (measured)", "core_hours": "CPU core-hours (measured)",
            "flops": "training FLOPs (analytic)", "samples": "training samples (counted)",
            "tokens": "training tokens (counted)", "step": "training step"}

# The verdicts of a LOO row (Section 4) and what stands behind each (rlscale.fit.verdicts).
BASE = "base"
HIGHER_CEILING, LOWER_CEILING = "higher ceiling", "lower ceiling"
HIGHER_EFFICIENCY, LOWER_EFFICIENCY = "higher efficiency", "lower efficiency"
WITHIN_MARGIN = "within margin"
UNRESOLVED = "unresolved"
VERDICTS = (BASE, HIGHER_CEILING, LOWER_CEILING, HIGHER_EFFICIENCY, LOWER_EFFICIENCY, WITHIN_MARGIN, UNRESOLVED)
FINDINGS = (HIGHER_CEILING, LOWER_CEILING, HIGHER_EFFICIENCY, LOWER_EFFICIENCY)
# Why a comparison is unresolved (ComparisonRow.reason) and what would resolve it (ComparisonRow.needs).
NOT_IDENTIFIED = "A not identified"
EVAL_NOISE = "eval noise"
DRIFT = "drift within runs"
SEED_SPREAD = "seed spread"
ONE_SEED = "one seed"
CEILING_OR_EFFICIENCY = "dB resolved but not the free fits' B"
MORE_COMPUTE, MORE_SEEDS, MORE_EVAL_PROMPTS = "more compute", "more seeds", "more distinct eval prompts"
MORE_EVALS = "more evals per run (a smaller trainer.eval_every), or more compute"
MULTIPLE_COMPARISONS = "multiple comparisons"
REASONS = (NOT_IDENTIFIED, ONE_SEED, MULTIPLE_COMPARISONS, EVAL_NOISE, DRIFT, SEED_SPREAD, CEILING_OR_EFFICIENCY)


def axis_label(x: str) -> str:
    """A truthful label of an x unit (measured units say so)."""
    return X_LABELS.get(x, x)


@dataclass
class FitSettings:
    """How the fits were made (shown in the report's summary).

    ``r0`` overrides R0 (default: the reward of each run's first eval, step 0). ``min_compute`` /
    ``min_compute_frac`` override the cutoff (absolute, or a fraction of the run's compute);
    ``fit_until_frac`` is ``fit_until`` as a fraction of each run's compute. ``a_grid`` = [lo, hi, step] and
    ``c_mid_grid`` = [lo, hi, n] are App. A.5's grids (``c_mid_grid`` None: the paper's [100, 40000] x 100,
    rescaled to the run, see rlscale.fit.space); ``a_bounds`` is the fast method's range of A (Eq. 1).
    ``x`` "auto" is resolved by ``fit_results`` (gpu_hours when every run's eval lines carry it, else flops)
    and stored resolved; ``x_requested`` keeps what was asked. ``paired``: compare variants seed by seed
    where they share seeds (rlscale.fit.pairing). ``margin_b``: the band on dB, as a fraction of the base's
    B at the fixed A, inside which a resolved interval reads ``within margin`` (rlscale.fit.verdicts).
    ``correction``: "holm" (default) controls the chance of any false finding in a table at 1 - ``ci_level``
    (rlscale.fit.family: Holm where the family is fixed, Bonferroni for tiers), "none" judges each
    comparison alone (``--no-correction``)."""

    x: str = "auto"
    x_requested: str = "auto"
    y: str = "val_reward"
    method: str = "fast"
    margin: float = 0.02
    cutoff_rule: str = ""
    fit_until: Optional[float] = None
    predict_at: List[float] = field(default_factory=list)
    ci_level: float = 0.95
    n_boot: int = 200
    seed: int = 0
    source: str = ""
    r0: Optional[float] = None
    min_compute: Optional[float] = None
    min_compute_frac: Optional[float] = None
    fit_until_frac: Optional[float] = None
    a_grid: List[float] = field(default_factory=lambda: [0.45, 0.80, 0.005])
    c_mid_grid: Optional[List[float]] = None
    a_bounds: List[float] = field(default_factory=lambda: [0.0, 1.0])
    paired: bool = True
    margin_b: float = 0.10
    correction: str = "holm"


@dataclass
class Prediction:
    """Predicted reward at compute ``x`` and its prediction interval [``lo``, ``hi``]: where one eval at ``x``
    is expected to land, counting the curve's parameters, the drift carried forward, the eval's own noise and
    the power law's alternative (rlscale.fit.forecast), not only where the curve is; and the observation
    there if any."""

    x: float
    y: float
    lo: Optional[float] = None
    hi: Optional[float] = None
    observed: Optional[float] = None


@dataclass
class PowerLawFit:
    """App. A.4 alternative R = A - D / C^B fitted on the same window."""

    A: Optional[float] = None
    D: Optional[float] = None
    B: Optional[float] = None
    sse: Optional[float] = None
    extrap_abs_err: Optional[float] = None
    status: str = "ok"
    message: str = ""


@dataclass
class RunFit:
    """One run's fit. ``status`` is "ok" or a reason class (no_data, too_few_points, flat, diverging,
    invalid, failed) with a one-line ``message``. ``points_x``/``points_y`` are all eval points and
    ``points_t`` their position on the deterministic axis ``t_axis`` (flops, else step) on which the window
    is decided (rlscale.fit.window). ``A_identified`` is False, with ``A_identified_reason``, when A or its
    interval reaches the edge of its range or the run ends before its curve bends (rlscale.fit.one_run);
    ``A_interval_open`` when only the interval does;
    ``eval_se`` is the median standard error of the fitted evals (``<y>_se``), ``eval_samples`` the
    median ``val_samples`` and ``eval_prompts`` the median ``val_prompts`` (distinct eval prompts), when the
    run reports them. ``noise_*`` and ``A_inflation`` describe the residual covariance
    (rlscale.fit.correlated); ``A_se`` is A's standard error read off its interval (half its width over the
    normal quantile of the level), ``A_se_within`` the part the run's own residuals make (without the eval
    set's shared offset). ``extrap_*``: the ``--fit-until`` check against the mean of the last
    ``extrap_evals`` evals (rlscale.fit.one_run): ``extrap_lo``/``extrap_hi`` its prediction interval
    (rlscale.fit.forecast; ``extrap_covered`` whether it holds the observation, ``extrap_drift`` the drift
    carried forward, ``extrap_noise_rule`` "estimated" or "conservative"), the carry-forward baseline
    (``extrap_cf_*``), the power law's prediction (``extrap_pl_predicted``) and the method nearest the
    observation (``extrap_best``, ``extrap_runner_up``, ``extrap_best_resolved``: beyond the eval noise).
    ``misfit``: why the curve is not a sigmoid ("" when it passed or
    was not tested), ``misfit_p`` the step-change test's p-value and ``misfit_llr`` the power law's
    log-likelihood ratio over the sigmoid (rlscale.fit.misfit)."""

    sweep: str
    variant: str
    seed: Optional[int] = None
    run_path: str = ""
    x: str = "gpu_hours"
    n_points: int = 0
    cutoff: Optional[float] = None
    cutoff_rule: str = ""
    R0: Optional[float] = None
    A: Optional[float] = None
    B: Optional[float] = None
    C_mid: Optional[float] = None
    A_lo: Optional[float] = None
    A_hi: Optional[float] = None
    B_lo: Optional[float] = None
    B_hi: Optional[float] = None
    C_mid_lo: Optional[float] = None
    C_mid_hi: Optional[float] = None
    sse: Optional[float] = None
    r2: Optional[float] = None
    fit_until: Optional[float] = None
    extrap_x: Optional[float] = None
    extrap_observed: Optional[float] = None
    extrap_predicted: Optional[float] = None
    extrap_abs_err: Optional[float] = None
    seed_std_A: Optional[float] = None
    seed_std_B: Optional[float] = None
    A_identified: Optional[bool] = None
    A_identified_reason: str = ""
    A_interval_open: Optional[bool] = None
    eval_se: Optional[float] = None
    eval_samples: Optional[float] = None
    eval_prompts: Optional[float] = None
    noise_phi: Optional[float] = None
    noise_drift_sd: Optional[float] = None
    noise_white_sd: Optional[float] = None
    A_inflation: Optional[float] = None
    A_se: Optional[float] = None
    A_se_within: Optional[float] = None
    extrap_evals: Optional[int] = None
    t_axis: str = ""
    predictions: List[Prediction] = field(default_factory=list)
    power_law: Optional[PowerLawFit] = None
    status: str = "ok"
    message: str = ""
    points_x: List[float] = field(default_factory=list)
    points_y: List[float] = field(default_factory=list)
    points_t: List[float] = field(default_factory=list)
    extrap_lo: Optional[float] = None
    extrap_hi: Optional[float] = None
    extrap_covered: Optional[bool] = None
    extrap_drift: Optional[float] = None
    extrap_noise_rule: str = ""
    extrap_cf_predicted: Optional[float] = None
    extrap_cf_lo: Optional[float] = None
    extrap_cf_hi: Optional[float] = None
    extrap_cf_abs_err: Optional[float] = None
    extrap_pl_predicted: Optional[float] = None
    extrap_best: str = ""
    extrap_runner_up: str = ""
    extrap_best_resolved: Optional[bool] = None
    misfit: str = ""
    misfit_p: Optional[float] = None
    misfit_llr: Optional[float] = None

    @property
    def fitted(self) -> bool:
        return self.status in FITTED_STATUSES

    CSV_COLUMNS = ("sweep", "variant", "seed", "x", "n_points", "cutoff", "R0", "A", "B", "C_mid", "A_lo",
                   "A_hi", "B_lo", "B_hi", "C_mid_lo", "C_mid_hi", "sse", "r2", "fit_until",
                   "extrap_abs_err", "seed_std_A", "seed_std_B", "status", "message", "run_path", "cutoff_rule",
                   "extrap_x", "extrap_observed", "extrap_predicted", "A_identified",
                   "A_identified_reason", "eval_se", "eval_samples", "t_axis", "eval_prompts", "noise_phi",
                   "noise_drift_sd", "noise_white_sd", "A_inflation", "A_se", "A_se_within", "extrap_evals", "A_interval_open",
                   "extrap_lo", "extrap_hi", "extrap_covered", "extrap_drift", "extrap_noise_rule",
                   "extrap_cf_predicted", "extrap_cf_lo", "extrap_cf_hi", "extrap_cf_abs_err", "extrap_pl_predicted",
                   "extrap_best", "extrap_runner_up", "extrap_best_resolved",
                   "misfit", "misfit_p", "misfit_llr")


@dataclass(frozen=True)
class Difference:
    """A difference between two variants (p - q) with its interval at the fits' ``ci_level``.
    ``source``: "paired n=3" (seed by seed, rlscale.fit.pairing), "unpaired n=3" (seed means), "seeds n=3"
    (a prediction's seed t-interval, rlscale.fit.predict), "bootstrap" (a one-seed prediction: the bootstrap
    of both runs' points, refitted) or "none"; a seed source without ``lo``/``hi`` had no spread to use.
    A t-interval keeps its standard error ``se`` and degrees of freedom ``df``, a bootstrap interval its
    ``draws``, so that the same difference can be read at another level (``interval``) and tested
    (rlscale.fit.family: the level a family of comparisons leaves to each)."""

    value: float
    lo: Optional[float]
    hi: Optional[float]
    source: str
    se: Optional[float] = None
    df: Optional[float] = None
    draws: Optional[Tuple[float, ...]] = field(default=None, repr=False, compare=False)

    def at_level(self, level: float) -> "Difference":
        """The same difference with its interval at ``level`` (a t-interval from ``se`` and ``df``, bootstrap
        percentiles from ``draws``); unchanged when it has neither."""
        if self.se is not None and self.df is not None:
            half = float(student_t.ppf((1 + level) / 2, self.df)) * self.se
            return replace(self, lo=self.value - half, hi=self.value + half)
        if self.draws:
            lo, hi = np.percentile(np.asarray(self.draws), [50 * (1 - level), 50 * (1 + level)])
            return replace(self, lo=float(lo), hi=float(hi))
        return self

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    def excludes_zero(self) -> bool:
        return self.has_interval and (self.lo > 0 or self.hi < 0)

    def beyond(self, margin: float) -> bool:
        """The whole interval lies outside [-margin, margin]."""
        return self.has_interval and (self.lo > margin or self.hi < -margin)

    def inside(self, margin: float) -> bool:
        """The whole interval lies inside [-margin, margin]."""
        return self.has_interval and -margin <= self.lo and self.hi <= margin


@dataclass(frozen=True)
class EvalNoise:
    """A sweep's eval precision (rlscale.fit.noise): the median standard error of its fitted evals
    (``<y>_se``, None when the runs do not write it), the median standard error of a run's A (``a_se``,
    from its interval), flagged when above ``limit`` (half the margin on A); ``share``: the share of the
    run-to-run variance of A that the runs' own noise makes (None without a seed spread);
    ``eval_prompts``: distinct eval prompts per eval (None when the runs do not say); ``sampling``: the share of
    a run's own variance of A that the eval's sampling makes, the part more eval prompts shrink (the rest is the
    reward's drift between evals, rlscale.fit.noise; None: all of it, as when no covariance is estimated)."""

    sweep: str
    median_se: Optional[float]
    a_se: float
    limit: float
    eval_prompts: Optional[float]
    share: Optional[float]
    sampling: Optional[float] = None

    @property
    def flagged(self) -> bool:
        return self.a_se > self.limit

    @property
    def sampled(self) -> float:
        return 1.0 if self.sampling is None else self.sampling

    @property
    def prompts_needed(self) -> Optional[float]:
        """Distinct eval prompts that bring a run's A to ``limit``: its sampling part shrinks as 1 / prompts, the
        drift's stays; None when the drift alone is beyond the limit (or the runs do not say their prompts)."""
        drift = (1 - self.sampled) * self.a_se ** 2
        room = self.limit ** 2 - drift
        if self.eval_prompts is None or room <= 0:
            return None
        return self.eval_prompts * self.sampled * self.a_se ** 2 / room

    def describe(self) -> str:
        head = f"eval noise: a run's A has a standard error of {self.a_se:.3g} (median), above {self.limit:.3g}"
        head += " (half the margin on A)"
        if self.share is not None:
            head += f", {self.share:.0%} of the run-to-run variance of A"
        if self.sampling is not None and self.sampling < 0.5:
            head += (f"; the eval's sampling is {self.sampling:.0%} of it, the reward's drift between evals the rest, "
                     "which more eval prompts do not shrink")
        if self.prompts_needed is not None:
            return head + (f"; about {self.prompts_needed:,.0f} distinct eval prompts (now {self.eval_prompts:,.0f}) "
                           "would resolve it")
        if self.eval_prompts is None and self.sampled >= 0.5:
            return head + f"; about {(self.a_se / self.limit) ** 2:.1f}x the distinct eval prompts would resolve it"
        return head + "; no number of eval prompts resolves it alone: more seeds average the drift out"


@dataclass
class ComparisonRow:
    """A row of comparison.csv. kind "rank": the ranking of a sweep's variants (rlscale.fit.ranking): tiers
    by A, then by B at the tier's mean A; variants that cannot be separated share a rank (``tie`` True).
    kind "loo": the leave-one-out table (Section 4): ``axis`` reverted, dA vs the base with its interval
    (``dA_lo``, ``dA_hi``), ``B_fixed`` refit with the A averaged over the sweep's identified runs
    (``A_fixed``), dB with its interval, ``margin_B`` (the band on dB inside which a resolved interval reads
    ``within margin``), the interval's ``interval_source`` (``paired n=k`` or ``unpaired n=a/b``,
    rlscale.fit.pairing), ``eval_share`` (the share of the run-to-run variance of A that eval noise makes)
    and a verdict (VERDICTS); an ``unresolved`` verdict has a ``reason`` and what would resolve it
    (``needs``)."""

    kind: str
    sweep: str
    variant: str
    rank: Optional[int] = None
    A: Optional[float] = None
    B: Optional[float] = None
    C_mid: Optional[float] = None
    axis: str = ""
    dA: Optional[float] = None
    A_fixed: Optional[float] = None
    B_fixed: Optional[float] = None
    dB: Optional[float] = None
    verdict: str = ""
    note: str = ""
    dA_lo: Optional[float] = None
    dA_hi: Optional[float] = None
    dB_lo: Optional[float] = None
    dB_hi: Optional[float] = None
    margin_B: Optional[float] = None
    interval_source: str = ""
    eval_share: Optional[float] = None
    reason: str = ""
    needs: str = ""
    tie: bool = False
    p_value: Optional[float] = None
    p_adjusted: Optional[float] = None
    family_size: Optional[int] = None
    correction: str = ""

    @property
    def verdict_text(self) -> str:
        """The verdict as printed: ``unresolved (reason): needs`` for an unresolved one."""
        if self.verdict == UNRESOLVED and self.reason:
            return f"{UNRESOLVED} ({self.reason})" + (f": {self.needs}" if self.needs else "")
        return self.verdict


@dataclass
class FitResults:
    """The whole of fits.json."""

    settings: FitSettings
    runs: List[RunFit] = field(default_factory=list)
    comparison: List[ComparisonRow] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, allow_nan=False, default=_nan_to_none)

    @classmethod
    def from_json(cls, text: str) -> "FitResults":
        data = json.loads(text)
        runs = []
        for r in data.get("runs", []):
            r = dict(r)
            r["predictions"] = [Prediction(**p) for p in r.get("predictions", [])]
            r["power_law"] = PowerLawFit(**r["power_law"]) if r.get("power_law") else None
            runs.append(RunFit(**_known(RunFit, r)))
        return cls(settings=FitSettings(**_known(FitSettings, data.get("settings", {}))), runs=runs,
                   comparison=[ComparisonRow(**_known(ComparisonRow, c)) for c in data.get("comparison", [])])

    @classmethod
    def load(cls, path: Path) -> "FitResults":
        return cls.from_json(Path(path).read_text())


def _known(klass, data: dict) -> dict:
    names = {f.name for f in fields(klass)}
    return {k: v for k, v in data.items() if k in names}


def _nan_to_none(obj):
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
