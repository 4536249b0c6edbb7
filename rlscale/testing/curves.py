"""Synthetic reward curves with known parameters, from the paper's Table 1 (C_mid, B, A), for tests and
benchmarks: Eq. 1 plus Gaussian noise on every eval, a writer of the results contract (metrics.jsonl
and config.yaml) so the whole ``rlscale fit`` path can be exercised on them, and leave-one-out sweeps
with known truth (axes that change A or B by a known amount, or nothing) at paper-scale noise; and evals drawn
as a trainer makes them (EvalDraw: binomial or over a fixed set of prompts of different difficulty, on a true
reward that drifts from eval to eval) with seed effects shared by the variants of one seed (SeedSpread).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
from scipy.special import expit

from rlscale.fit.curves import Curve
from rlscale.fit.forms import sigmoid


@dataclass(frozen=True)
class CurveSpec:
    """A Table 1 row: the true C_mid (GPU-hours), B and A."""

    C_mid: float
    B: float
    A: float


TABLE1: Dict[str, CurveSpec] = {
    "scalerl": CurveSpec(2542, 1.92, 0.610),
    "gen_32k": CurveSpec(11272, 1.89, 0.645),
    "gens_8": CurveSpec(2542, 2.44, 0.585),
    "gens_24": CurveSpec(3054, 2.22, 0.590),
    "gens_32": CurveSpec(2936, 2.07, 0.595),
    "scout_moe": CurveSpec(4242, 1.65, 0.710),
    "batch_512": CurveSpec(2818, 1.77, 0.605),
    "batch_2048": CurveSpec(10909, 1.70, 0.645),
    "math": CurveSpec(2896, 2.05, 0.595),
    "code": CurveSpec(1675, 1.09, 0.615),
}
R0 = 0.30


def synthetic_curve(spec: CurveSpec, n_points: int, noise: float, rng: np.random.Generator,
                    x_max: Optional[float] = None, r0: float = R0):
    """Evals at x = 0 (R0) and n_points evenly spaced up to ``x_max``, each with N(0, noise) added (the
    step-0 eval too). Default ``x_max``: where the curve has made 95% of its rise, (C_mid/x)^B = 1/19, and
    at least 16k GPU-hours (the paper's LOO runs). Returns (x, y)."""
    x_max = x_max if x_max is not None else max(16000.0, spec.C_mid * 19 ** (1 / spec.B))
    x = np.linspace(0.0, x_max, n_points + 1)
    return x, sigmoid(x, r0, spec.A, spec.B, spec.C_mid) + rng.normal(0.0, noise, x.size)


def write_run(run_dir: Path, x: np.ndarray, y: np.ndarray, seed: Optional[int] = 0,
              se: Optional[np.ndarray] = None) -> None:
    """A results-contract run: eval lines (compute in every unit, derived from x as GPU-hours; with ``se``,
    each eval's ``val_reward_se``) interleaved with train lines, and a config.yaml with the seed."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if seed is not None:
        (run_dir / "config.yaml").write_text(f"seed: {seed}\n")
    with open(run_dir / "metrics.jsonl", "w") as fh:
        for step, (gpu_hours, reward) in enumerate(zip(x, y)):
            compute = {"gpu_hours": float(gpu_hours), "flops": float(gpu_hours) * 3.6e18, "samples": step * 768,
                       "tokens": step * 768 * 4000}
            fh.write(json.dumps({"step": step, "kind": "train", "reward": float(reward), **compute}) + "\n")
            errors = {} if se is None else {"val_reward_se": float(se[step])}
            fh.write(json.dumps({"step": step, "kind": "eval", "val_reward": float(reward), "val_samples": 16000,
                                 **errors, **compute}) + "\n")


@dataclass(frozen=True)
class LooNoise:
    """Paper-scale noise of a LOO sweep: each seed's A drawn around the truth with sd ``a_jitter`` (the
    paper's 3 runs varied by +-0.015 in A, App. A.7), N(0, ``point``) on every eval, evals every ``every``
    GPU-hours up to ``x_max``."""

    a_jitter: float = 0.008
    point: float = 0.005
    every: float = 200.0
    x_max: float = 16000.0


def loo_sweep(base: CurveSpec, effects: Dict[str, Tuple[float, float]], n_seeds: int, rng: np.random.Generator,
              noise: LooNoise = LooNoise(), r0: float = 0.3, sweep: str = "loo") -> Tuple[List[Curve], dict]:
    """The curves of a LOO sweep (base "base" and one variant per ``effects`` entry, name -> (dA, dB)
    added to the base's A and B; (0, 0) makes an exact copy of the base), ``n_seeds`` seeds each, and its
    sweep.json (kind ``loo``)."""
    specs = {"base": base, **{name: replace(base, A=base.A + d_a, B=base.B + d_b)
                              for name, (d_a, d_b) in effects.items()}}
    return sweep_curves(specs, n_seeds, rng, noise, r0, sweep, kind="loo")


def sweep_curves(specs: Dict[str, CurveSpec], n_seeds: int, rng: np.random.Generator, noise: LooNoise = LooNoise(),
                 r0: float = 0.3, sweep: str = "sweep", kind: str = "grid") -> Tuple[List[Curve], dict]:
    """The curves of a sweep with one variant per ``specs`` entry (the first is the base), ``n_seeds``
    seeds each at ``noise``, and its sweep.json. Each eval line's step is its deterministic position
    ``t``; its SE is the point noise."""
    x = np.arange(0.0, noise.x_max + noise.every / 2, noise.every)
    curves, variants = [], []
    base = next(iter(specs))
    for name, spec in specs.items():
        for seed in range(n_seeds):
            a = spec.A + rng.normal(0.0, noise.a_jitter)
            y = sigmoid(x, r0, a, spec.B, spec.C_mid) + rng.normal(0.0, noise.point, x.size)
            y[0] = r0
            curves.append(Curve(sweep=sweep, variant=name, seed=seed, run_path=f"{sweep}/{name}_s{seed}", x=x, y=y,
                                t=np.arange(x.size, dtype=float), se=np.full(x.size, noise.point),
                                samples=np.full(x.size, np.nan), t_axis="step"))
            variants.append({"name": name, "run": f"{name}_s{seed}", "axis": None if name == base else name,
                             "seed": seed})
    return curves, {"name": sweep, "base": base, "kind": kind, "variants": variants}


def truncated(curve: Curve, x_max: float) -> Curve:
    """``curve`` as it stood when its compute reached ``x_max`` (its evals at x <= x_max)."""
    keep = curve.x <= x_max * (1 + 1e-12)
    return replace(curve, x=curve.x[keep], y=curve.y[keep], t=curve.t[keep], se=curve.se[keep],
                   samples=curve.samples[keep], prompts=curve.prompts[keep] if curve.prompts.size else curve.prompts)


# Eval noise beyond Gaussian points: a drifting true reward, binomial or heavy-tailed evals, a fixed eval set of
# prompts of different difficulty, and seed effects shared by the variants of one seed (bench/verdict_bench.py).

@dataclass(frozen=True)
class EvalDraw:
    """How a synthetic run's evals are drawn from its true reward (Eq. 1, plus a drift when ``drift_sd`` > 0).

    - Drift: an AR(1) path added to the true reward at every eval after step 0 (the step-0 policy is the same
      for every run), stationary with sd ``drift_sd`` and correlation ``drift_phi`` between consecutive evals.
    - Independent samples (``prompts`` 0): each eval is binomial(``samples``, p) / ``samples`` at the true
      reward p (clipped to [0, 1]), its SE sqrt(y (1 - y) / samples) from the observed y, as a trainer writes it
      (every sample a fresh prompt, so distinct prompts = samples).
    - Clustered prompts (``prompts`` K > 0): a fixed eval set of K prompts, prompt j passing with probability
      expit(m(p) + u_j), u_j ~ N(0, ``prompt_sd``) drawn once (:func:`prompt_offsets`) and m(p) set so that the
      population of prompts (u ~ N(0, prompt_sd)) has mean p (:func:`logit_normal_location`): the truth is the
      population curve, and the eval set's own mean differs from it by an offset all its evals share. Each
      prompt gets ``per_prompt`` samples per eval; the eval is the mean of the per-prompt pass rates and its SE
      their sd over prompts / sqrt(K).

    Evals every ``every`` GPU-hours from 0 up to ``x_max``."""

    samples: int = 400
    prompts: int = 0
    per_prompt: int = 1
    prompt_sd: float = 1.5
    drift_sd: float = 0.0
    drift_phi: float = 0.9
    every: float = 250.0
    x_max: float = 16000.0
    t_df: float = 0.0

    @property
    def eval_samples(self) -> int:
        """Samples per eval."""
        return self.prompts * self.per_prompt if self.prompts else self.samples

    @property
    def distinct_prompts(self) -> int:
        """Distinct prompts per eval."""
        return self.prompts if self.prompts else self.samples


@dataclass(frozen=True)
class SeedSpread:
    """Run-to-run spread of A: each seed's A offset ~ N(0, ``a_sd``) (the paper's 3 runs varied by +-0.015,
    App. A.7). ``shared``: common random numbers, as rlscale's trainer draws everything from the seed: every
    variant run with seed s gets the same A offset and the same drift path; else each run draws its own. The
    binomial eval draws are always each run's own (the policies differ)."""

    a_sd: float = 0.012
    shared: bool = True


def ar1_drift(n: int, sd: float, phi: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary AR(1) path of ``n`` steps: sd ``sd``, lag-one correlation ``phi`` (first value drawn from the
    stationary distribution). Zeros when ``sd`` is 0."""
    if sd <= 0 or n == 0:
        return np.zeros(n)
    shocks = rng.standard_normal(n)
    path = np.empty(n)
    path[0] = sd * shocks[0]
    innovation = sd * np.sqrt(1.0 - phi * phi)
    for i in range(1, n):
        path[i] = phi * path[i - 1] + innovation * shocks[i]
    return path


def binomial_evals(p: np.ndarray, samples: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """Evals of ``samples`` independent samples at pass probability ``p`` (clipped to [0, 1]): (y, se), se from
    the observed y (EvalDraw)."""
    y = rng.binomial(samples, np.clip(p, 0.0, 1.0)) / samples
    return y, written_se(y, samples)


def student_t_evals(p: np.ndarray, samples: int, df: float, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """Evals at pass probability ``p`` with Student-t errors of ``df`` (> 2) degrees of freedom, each scaled to
    the sd of the binomial eval of ``samples`` samples, sqrt(p (1 - p) / samples); y clipped to [0, 1], (y, se)
    with se written as for a binomial eval (EvalDraw)."""
    if df <= 2:
        raise ValueError(f"t_df must be > 2 (a finite variance), got {df:g}")
    p = np.clip(p, 0.0, 1.0)
    scale = np.sqrt(p * (1 - p) / samples * (df - 2) / df)
    y = np.clip(p + scale * rng.standard_t(df, np.shape(p)), 0.0, 1.0)
    return y, written_se(y, samples)


def written_se(y: np.ndarray, samples: int) -> np.ndarray:
    """The SE a trainer writes for an eval of ``samples`` independent samples that scored ``y``."""
    return np.sqrt(y * (1 - y) / samples)


_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite_e.hermegauss(48)


def logit_normal_mean(m: np.ndarray, sd: float) -> np.ndarray:
    """E[expit(m + u)] for u ~ N(0, sd) (Gauss-Hermite, 48 nodes), elementwise over ``m``."""
    values = expit(np.asarray(m, dtype=float)[..., None] + sd * _HERMITE_NODES)
    return values @ _HERMITE_WEIGHTS / _HERMITE_WEIGHTS.sum()


def logit_normal_location(p: np.ndarray, sd: float) -> np.ndarray:
    """The location m with E[expit(m + u)] = p, u ~ N(0, sd), elementwise (bisection; p clipped to
    [1e-6, 1 - 1e-6])."""
    p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
    lo, hi = np.full(p.shape, -30.0), np.full(p.shape, 30.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = logit_normal_mean(mid, sd) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def prompt_offsets(prompts: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    """The logit difficulty offsets of a fixed eval set of ``prompts`` prompts, N(0, ``sd``)."""
    return rng.normal(0.0, sd, prompts)


def clustered_evals(p: np.ndarray, offsets: np.ndarray, per_prompt: int, sd: float,
                    rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """Evals of a fixed eval set (EvalDraw): at population reward ``p`` (one value per eval) prompt j passes
    with probability expit(m(p) + offsets[j]), ``per_prompt`` samples each; (y, se) with y the mean of the
    per-prompt pass rates and se their sd (ddof 1) over prompts / sqrt(K)."""
    location = logit_normal_location(p, sd)
    rates = rng.binomial(per_prompt, expit(location[:, None] + offsets[None, :])) / per_prompt
    return rates.mean(axis=1), rates.std(axis=1, ddof=1) / np.sqrt(offsets.size)


def rise_x(spec: CurveSpec, fraction: float) -> float:
    """The compute at which Eq. 1 has made ``fraction`` of its rise R0 -> A: C_mid (f / (1 - f))^(1/B)."""
    return spec.C_mid * (fraction / (1 - fraction)) ** (1 / spec.B)


def eval_x(draw: EvalDraw) -> np.ndarray:
    """The eval compute of ``draw``: 0, every, 2 every, ... up to x_max."""
    return np.arange(0.0, draw.x_max + draw.every / 2, draw.every)


def drawn_curve(spec: CurveSpec, draw: EvalDraw, rng: np.random.Generator, r0: float = R0,
                drift: Optional[np.ndarray] = None, offsets: Optional[np.ndarray] = None, sweep: str = "synthetic",
                variant: str = "run", seed: Optional[int] = 0) -> Curve:
    """One run's curve with evals drawn as ``draw`` says from the true reward Eq. 1 at ``spec`` plus a drift:
    ``drift`` (one value per eval, its step-0 value ignored) or, when None, a fresh :func:`ar1_drift`; for
    clustered prompts ``offsets`` is the eval set (fresh when None). The curve's ``se`` is the written SE,
    ``samples`` and ``prompts`` the eval size; ``t`` the eval's position."""
    x = eval_x(draw)
    return drawn_truth(x, sigmoid(x, r0, spec.A, spec.B, spec.C_mid), draw, rng, drift, offsets, sweep, variant, seed)


def drawn_truth(x: np.ndarray, truth: np.ndarray, draw: EvalDraw, rng: np.random.Generator,
                drift: Optional[np.ndarray] = None, offsets: Optional[np.ndarray] = None, sweep: str = "synthetic",
                variant: str = "run", seed: Optional[int] = 0) -> Curve:
    """The curve of evals at ``x`` drawn as ``draw`` says from the true reward ``truth`` (one value per eval, of
    any shape) plus a drift, as :func:`drawn_curve` does for Eq. 1."""
    if drift is None:
        drift = ar1_drift(x.size, draw.drift_sd, draw.drift_phi, rng)
    p = truth + np.where(np.arange(x.size) == 0, 0.0, drift[:x.size])
    if draw.prompts:
        if offsets is None:
            offsets = prompt_offsets(draw.prompts, draw.prompt_sd, rng)
        y, se = clustered_evals(p, offsets, draw.per_prompt, draw.prompt_sd, rng)
    elif draw.t_df:
        y, se = student_t_evals(p, draw.samples, draw.t_df, rng)
    else:
        y, se = binomial_evals(p, draw.samples, rng)
    name = variant if seed is None else f"{variant}_s{seed}"
    return Curve(sweep=sweep, variant=variant, seed=seed, run_path=f"{sweep}/{name}", x=x, y=y,
                 t=np.arange(x.size, dtype=float), se=se, samples=np.full(x.size, float(draw.eval_samples)),
                 prompts=np.full(x.size, float(draw.distinct_prompts)), t_axis="step")


def seeded_sweep(specs: Dict[str, CurveSpec], n_seeds: int, rng: np.random.Generator, draw: EvalDraw,
                 spread: SeedSpread = SeedSpread(), r0: float = R0, sweep: str = "sweep",
                 kind: str = "grid") -> Tuple[List[Curve], dict]:
    """The curves of a sweep (one variant per ``specs`` entry, the first the base; ``n_seeds`` seeds each) with
    evals drawn by ``draw``, each run's A moved by its seed's offset (``spread``; shared offsets and drift
    paths by seed when ``spread.shared``), one eval set for the whole sweep (clustered prompts), and its
    sweep.json. The draws of seed s come before those of seed s + 1 and do not depend on ``n_seeds``'s other
    seeds, so the first k seeds of a sweep drawn with n_seeds >= k are the same runs whatever n_seeds is
    (given the same ``rng`` state and specs)."""
    n = eval_x(draw).size
    offsets = prompt_offsets(draw.prompts, draw.prompt_sd, rng) if draw.prompts else None
    base = next(iter(specs))
    curves: List[Curve] = []
    variants: List[dict] = []
    for seed in range(n_seeds):
        seed_rng = np.random.default_rng(rng.integers(2 ** 63))
        shared_a = seed_rng.normal(0.0, spread.a_sd)
        shared_drift = ar1_drift(n, draw.drift_sd, draw.drift_phi, seed_rng)
        for name, spec in specs.items():
            a = shared_a if spread.shared else seed_rng.normal(0.0, spread.a_sd)
            drift = shared_drift if spread.shared else ar1_drift(n, draw.drift_sd, draw.drift_phi, seed_rng)
            curves.append(drawn_curve(replace(spec, A=spec.A + a), draw, seed_rng, r0, drift, offsets, sweep, name,
                                      seed))
            variants.append({"name": name, "run": f"{name}_s{seed}", "axis": None if name == base else name,
                             "seed": seed})
    return curves, {"name": sweep, "base": base, "kind": kind, "variants": variants}


def seeded_loo_sweep(base: CurveSpec, effects: Dict[str, Tuple[float, float]], n_seeds: int,
                     rng: np.random.Generator, draw: EvalDraw, spread: SeedSpread = SeedSpread(), r0: float = R0,
                     sweep: str = "loo") -> Tuple[List[Curve], dict]:
    """:func:`loo_sweep` with the noise of :func:`seeded_sweep`: base "base" and one variant per ``effects``
    entry (name -> (dA, dB); (0, 0) an exact copy of the base), sweep.json of kind ``loo``."""
    specs = {"base": base, **{name: replace(base, A=base.A + d_a, B=base.B + d_b)
                              for name, (d_a, d_b) in effects.items()}}
    return seeded_sweep(specs, n_seeds, rng, draw, spread, r0, sweep, kind="loo")
