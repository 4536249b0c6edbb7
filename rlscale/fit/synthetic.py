"""Synthetic reward curves with known parameters, from the paper's Table 1 (C_mid, B, A), for tests and
benchmarks: Eq. 1 plus Gaussian noise on every eval, a writer of the results contract (metrics.jsonl
and config.yaml) so the whole ``rlscale fit`` path can be exercised on them, and leave-one-out sweeps
with known truth (axes that change A or B by a known amount, or nothing) at paper-scale noise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

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


def write_run(run_dir: Path, x: np.ndarray, y: np.ndarray, seed: Optional[int] = 0) -> None:
    """A results-contract run: eval lines (compute in every unit, derived from x as GPU-hours) interleaved
    with train lines, and a config.yaml with the seed."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if seed is not None:
        (run_dir / "config.yaml").write_text(f"seed: {seed}\n")
    with open(run_dir / "metrics.jsonl", "w") as fh:
        for step, (gpu_hours, reward) in enumerate(zip(x, y)):
            compute = {"gpu_hours": float(gpu_hours), "flops": float(gpu_hours) * 3.6e18, "samples": step * 768,
                       "tokens": step * 768 * 4000}
            fh.write(json.dumps({"step": step, "kind": "train", "reward": float(reward), **compute}) + "\n")
            fh.write(json.dumps({"step": step, "kind": "eval", "val_reward": float(reward), "val_samples": 16000,
                                 **compute}) + "\n")


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
