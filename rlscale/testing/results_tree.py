"""A synthetic results tree with known Eq.-1 parameters, for the report's tests, benchmark and demos.

Curves follow ScaleRL (arXiv 2510.13786) Eq. 1 with Table-1-like parameters (A ~ 0.55-0.66, B ~ 1.4-2.4,
C_mid ~ 2-5k GPU-hours) on a 16k GPU-hour budget, fitted from 1.5k to 8k and extrapolated to 16k like the
paper's LOO runs, the extrapolation checked as ``rlscale fit --fit-until`` checks it (against the mean of the
last three evals). fits.json is written from the known parameters (not by ``rlscale fit``) and last, so it
is newer than every metrics file, in GPU-hours or in FLOPs; a variant is one run or several seeds, and its
rank row (one per variant) ties it with the variants within the margin. With ``edge_cases`` the first sweep
also holds a variant named ``<script>alert(1)</script>`` whose config has ``&``, ``<`` and quotes, a run
whose fit failed, a diverged run (truncation above the paper's 10-15 % instability range) and a failed run
without eval points.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional

import numpy as np
import yaml

from rlscale.fit.one_run import EXTRAP_EVALS
from rlscale.fit.results import (FITS_JSON, ComparisonRow, FitResults, FitSettings, PowerLawFit, Prediction,
                                RunFit)
from rlscale.report.curves import power_law, sigmoid
from rlscale.runfolder import atomic_write_json, atomic_write_text, write_status

XSS_NAME = "<script>alert(1)</script>"
TRICKY_NOTE = "a & b < c > d \"double\" 'single'"
# App. A.7: three runs of one recipe varied by at most +-0.015 in A.
SEED_SD_A = 0.005
BUDGET = 16000.0
CUTOFF = 1500.0
FIT_UNTIL = 8000.0
R0 = 0.2
# Compute units fits.json may use, in GPU-hours (FLOPs: an analytic 3.6e18 per GPU-hour).
UNITS = {"gpu_hours": 1.0, "flops": 3.6e18}
# The LOO axes of Section 4: ScaleRL with one choice reverted to the baseline's.
_AXES = ("loss=dapo", "precision=bf16_head", "aggregation=sample", "aggregation=token",
         "normalization=group", "filtering=none", "curriculum=uniform", "offpolicy=ppo", "length=penalty")


@dataclass
class SyntheticRun:
    """One planned run: its true parameters and how it ends (state, fit status)."""

    sweep: str
    variant: str
    A: float
    B: float
    C_mid: float
    state: str = "done"
    reason: str = ""
    fit_status: str = "ok"
    fit_message: str = ""
    peak_truncation: float = 0.03
    n_eval: int = 40
    note: str = "ScaleRL recipe"
    seed: Optional[int] = None

    @property
    def folder(self) -> str:
        name = re.sub(r"[^A-Za-z0-9._=-]", "_", self.variant)
        return name if self.seed is None else f"{name}_s{self.seed}"


def synthetic_plan(n_runs: int, n_sweeps: int, n_loo_sweeps: int = 1, edge_cases: bool = True,
                   seed: int = 0, seeds: int = 1) -> List[SyntheticRun]:
    """``n_runs`` variants spread over ``n_sweeps`` sweeps (the first ``n_loo_sweeps`` named loo-*), each
    one run, or ``seeds`` runs (seeds 0, 1, ...) whose A varies by SEED_SD_A when ``seeds`` > 1."""
    rng = np.random.default_rng(seed)
    plan = []
    for s in range(n_sweeps):
        loo = s < n_loo_sweeps
        sweep = f"loo-{s}" if loo else f"grid-{s}"
        count = n_runs // n_sweeps + (s < n_runs % n_sweeps)
        for i in range(count):
            name = "scalerl" if i == 0 else _AXES[(i - 1) % len(_AXES)]
            if i > len(_AXES):
                name += f"-s{(i - 1) // len(_AXES)}"
            # LOO variants of the paper share A within the margin and differ in B (Section 4).
            truth = SyntheticRun(sweep, name, A=0.61 if loo else float(rng.uniform(0.55, 0.66)),
                                 B=float(rng.uniform(1.4, 2.4)), C_mid=float(rng.uniform(2000, 5000)),
                                 peak_truncation=float(rng.uniform(0.01, 0.06)))
            plan += [truth] if seeds == 1 else [
                replace(truth, seed=k, A=truth.A + float(rng.normal(0, SEED_SD_A))) for k in range(seeds)]
    if edge_cases:
        first = list(dict.fromkeys(r.variant for r in plan if r.sweep == plan[0].sweep))
        for variant, edit in zip(reversed(first[1:]), _EDGE_CASES):
            for run in plan:
                if run.sweep == plan[0].sweep and run.variant == variant:
                    edit(run)
    return plan


def _xss(run: SyntheticRun) -> None:
    run.variant, run.note = XSS_NAME, TRICKY_NOTE


def _few_points(run: SyntheticRun) -> None:
    run.variant, run.n_eval = "few-points", 5
    run.fit_status, run.fit_message = "too_few_points", "2 eval points after the cutoff (need 4)"


def _diverged(run: SyntheticRun) -> None:
    run.variant, run.peak_truncation = "diverged", 0.18
    run.state, run.reason = "diverged", "truncation rate 0.18 > 0.15 for 20 consecutive steps"
    run.fit_status, run.fit_message = "diverging", "reward falls after its peak"


def _failed(run: SyntheticRun) -> None:
    run.variant, run.n_eval = "oom", 0
    run.state, run.reason = "failed", "CUDA out of memory at step 12"
    run.fit_status, run.fit_message = "no_data", "no eval lines"


_EDGE_CASES = (_xss, _few_points, _diverged, _failed)


def write_results(root: Path, plan: List[SyntheticRun], n_train: int = 200, seed: int = 0,
                  x: str = "gpu_hours") -> FitResults:
    """Write every run's files and sweep.json under ``root``, then fits.json with its compute in ``x``
    (gpu_hours or flops, UNITS); return what fits.json holds."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    per_gpu_hour = UNITS[x]
    fits = []
    for run in plan:
        folder = root / run.sweep / run.folder
        eval_x, eval_y = _write_run(folder, run, n_train, rng)
        fits.append(_in_unit(_run_fit(run, eval_x, eval_y, rng), per_gpu_hour))
    for sweep in dict.fromkeys(r.sweep for r in plan):
        atomic_write_json(root / sweep / "sweep.json", _sweep_json(sweep, [r for r in plan if r.sweep == sweep]))
    settings = FitSettings(x=x, method="grid", cutoff_rule=f"x >= {CUTOFF * per_gpu_hour:g} {x}",
                           fit_until=FIT_UNTIL * per_gpu_hour, predict_at=[BUDGET * per_gpu_hour])
    results = FitResults(settings, fits, _comparison(fits, settings.margin))
    atomic_write_text(root / FITS_JSON, results.to_json())
    return results


def _sweep_json(sweep: str, runs: List[SyntheticRun]) -> dict:
    """sweep.json as ``rlscale sweep`` writes it (rlscale.sweep.state.SweepRecord): one entry per run."""
    loo = sweep.startswith("loo")
    variants = [{"name": r.variant, "run": r.folder, "config": f"{sweep}/{r.folder}/config.yaml",
                 "overrides": [] if r.variant == "scalerl" else [r.variant],
                 "axis": r.variant.split("=")[0] if loo and r.variant != "scalerl" else None, "seed": r.seed or 0,
                 "run_dir": f"{sweep}/{r.folder}"} for r in runs]
    return {"name": sweep, "kind": "loo" if loo else "grid", "base": "scalerl", "launcher": "local",
            "spec": f"sweeps/{sweep}.yaml", "seeds": len({r.seed for r in runs}), "overrides": [],
            "variants": variants, "jobs": {}}


def _write_run(folder: Path, run: SyntheticRun, n_train: int, rng: np.random.Generator):
    folder.mkdir(parents=True, exist_ok=True)
    config = {"sweep": run.sweep, "variant": run.variant, "note": run.note,
              "loss": {"name": "cispo", "eps_max": 4.0}, "aggregation": "prompt", "normalization": "batch",
              "batch": {"prompts": 48, "generations": 16}, "optim": {"lr": 5e-7, "eps": 1e-15}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    end = BUDGET if run.state == "done" else BUDGET * 0.4
    n_steps = max(n_train, 1)
    lines = []
    for step in range(1, n_steps + 1):
        c = end * step / n_steps
        progress = step / n_steps
        trunc = (run.peak_truncation * (0.5 + 0.5 * progress ** 3) if run.state != "diverged" else  # held at 2 %,
                 0.02 + (run.peak_truncation - 0.02) * max(0.0, 2 * progress - 1)) + rng.normal(0, 0.003)  # then rising
        lines.append(_compute(step, c) | {
            "kind": "train", "reward": float(sigmoid(c, run.A, run.B, run.C_mid, R0)),
            "truncation_rate": max(trunc, 0.0), "entropy": 0.9 * np.exp(-run.B * progress) + 0.1,
            "loss": float(rng.normal(0, 0.01)), "grad_norm": float(abs(rng.normal(0.3, 0.05))),
            "kept_prompt_fraction": 0.9 - 0.35 * progress + float(rng.normal(0, 0.02)),
            "lag_mean": 4.0 + float(rng.normal(0, 0.3)), "lag_max": 8,
            "samples_per_s": 50.0 + float(rng.normal(0, 3)), "tokens_per_s": 45000.0 + float(rng.normal(0, 2e3))})
    eval_x = np.linspace(end / max(run.n_eval, 1), end, run.n_eval)
    eval_y = sigmoid(eval_x, run.A, run.B, run.C_mid, R0) + rng.normal(0, 0.006, run.n_eval)
    for i, (c, y) in enumerate(zip(eval_x, eval_y)):
        step = round(n_steps * (i + 1) / max(run.n_eval, 1))
        lines.append(_compute(step, c) | {"kind": "eval", "val_reward": float(y), "val_samples": 16000})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_status(folder, run.state, run.reason)
    return eval_x, eval_y


def _compute(step: int, c: float) -> dict:
    return {"step": step, "gpu_hours": float(c), "flops": float(c) * UNITS["flops"], "samples": step * 768,
            "tokens": step * 768 * 900}


def _in_unit(fit: RunFit, per_gpu_hour: float) -> RunFit:
    """``fit`` (made in GPU-hours) with its compute in a unit worth ``per_gpu_hour`` of them: C_mid and every
    x scale, and the power law's D = (A - R_C) C^B by per_gpu_hour^B."""
    k = per_gpu_hour
    scaled = {name: getattr(fit, name) * k for name in ("cutoff", "fit_until", "extrap_x", "C_mid", "C_mid_lo",
                                                         "C_mid_hi") if getattr(fit, name) is not None}
    power = fit.power_law
    return replace(fit, **scaled, points_x=[v * k for v in fit.points_x],
                   predictions=[replace(p, x=p.x * k) for p in fit.predictions],
                   power_law=replace(power, D=power.D * k ** power.B) if power is not None else None)


def _run_fit(run: SyntheticRun, eval_x: np.ndarray, eval_y: np.ndarray, rng: np.random.Generator) -> RunFit:
    fit = RunFit(sweep=run.sweep, variant=run.variant, seed=run.seed, run_path=f"{run.sweep}/{run.folder}",
                 n_points=len(eval_x), cutoff=CUTOFF, cutoff_rule="fixed", R0=R0, status=run.fit_status,
                 message=run.fit_message, points_x=eval_x.tolist(), points_y=eval_y.tolist())
    if run.fit_status != "ok":
        return fit
    fit.A, fit.B, fit.C_mid = run.A + rng.normal(0, 0.002), run.B * rng.uniform(0.97, 1.03), run.C_mid
    fit.A_lo, fit.A_hi = fit.A - 0.011, fit.A + 0.011
    fit.B_lo, fit.B_hi = fit.B * 0.9, fit.B * 1.1
    fit.C_mid_lo, fit.C_mid_hi = fit.C_mid * 0.9, fit.C_mid * 1.1
    fit.sse, fit.r2, fit.fit_until = 0.0012, 0.985, FIT_UNTIL
    at_budget = float(sigmoid(BUDGET, fit.A, fit.B, fit.C_mid, R0))
    fit.predictions = [Prediction(BUDGET, at_budget, at_budget - 0.015, at_budget + 0.015, float(eval_y[-1]))]
    # App. A.4: R = A - D/C^B through the sigmoid at both ends of the window; with a shallow B it
    # overshoots A, as the paper's power law did (A = 1.0 vs ~0.65).
    p_B = 0.6
    (r1, r2) = sigmoid(np.array([CUTOFF, FIT_UNTIL]), fit.A, fit.B, fit.C_mid, R0)
    p_D = float(r2 - r1) / (CUTOFF ** -p_B - FIT_UNTIL ** -p_B)
    p_A = float(r2) + p_D * FIT_UNTIL ** -p_B
    fit.power_law = PowerLawFit(A=p_A, D=p_D, B=p_B, sse=0.003)
    # The extrapolation check as rlscale.fit.one_run makes it: the mean of the last EXTRAP_EVALS evals beyond
    # fit_until against each form's prediction averaged over the same evals.
    beyond = eval_x > FIT_UNTIL
    if beyond.any():
        checked_x, checked_y = eval_x[beyond][-EXTRAP_EVALS:], eval_y[beyond][-EXTRAP_EVALS:]
        fit.extrap_x, fit.extrap_evals = float(checked_x[-1]), int(checked_x.size)
        fit.extrap_observed = float(np.mean(checked_y))
        fit.extrap_predicted = float(np.mean(sigmoid(checked_x, fit.A, fit.B, fit.C_mid, R0)))
        fit.extrap_abs_err = abs(fit.extrap_predicted - fit.extrap_observed)
        fit.power_law.extrap_abs_err = abs(float(np.mean(power_law(checked_x, p_A, p_D, p_B))) - fit.extrap_observed)
    return fit


@dataclass(frozen=True)
class _VariantMean:
    """A variant's seed means, as the fitter compares variants (App. A.7)."""

    variant: str
    A: float
    B: float
    C_mid: float
    seeds: int


def _comparison(fits: List[RunFit], margin: float) -> List[ComparisonRow]:
    """Rank rows, one per variant (its seeds' mean A; variants within the margin of their tier's first member
    share a rank, as rlscale.fit.ranking cuts tiers) and, for loo-* sweeps, LOO rows as Section 4 reads them
    (B at the mean A taken as the variant's B: the synthetic LOO variants share A)."""
    rows = []
    for sweep in dict.fromkeys(f.sweep for f in fits):
        groups: dict = {}
        for f in fits:
            if f.sweep == sweep and f.fitted:
                groups.setdefault(f.variant, []).append(f)
        means = sorted((_VariantMean(name, *np.mean([(f.A, f.B, f.C_mid) for f in group], axis=0), len(group))
                        for name, group in groups.items()), key=lambda m: -m.A)
        rows += _rank_rows(sweep, means, margin)
        if sweep.startswith("loo") and means:
            rows += _loo_rows(sweep, means, margin)
    return rows


def _rank_rows(sweep: str, means: List[_VariantMean], margin: float) -> List[ComparisonRow]:
    tiers: List[List[_VariantMean]] = []
    for m in means:
        if tiers and tiers[-1][0].A - m.A <= margin:
            tiers[-1].append(m)
        else:
            tiers.append([m])
    rows = []
    for rank, tier in enumerate(tiers, start=1):
        top = tier[0]
        for m in tier:
            notes = [f"mean of {m.seeds} seeds"] if m.seeds > 1 else []
            row = ComparisonRow("rank", sweep, m.variant, rank=rank, A=m.A, B=m.B, C_mid=m.C_mid, tie=len(tier) > 1)
            if m is not top:
                row.dA, row.dA_lo, row.dA_hi = m.A - top.A, m.A - top.A - 0.01, m.A - top.A + 0.01
                row.interval_source = f"seeds n={m.seeds}" if m.seeds > 1 else "bootstrap"
                notes.append(f"dA vs {top.variant}")
            if row.tie:
                notes.append("tie with " + ", ".join(o.variant for o in tier if o is not m))
            row.note = "; ".join(notes)
            rows.append(row)
    return rows


def _loo_rows(sweep: str, means: List[_VariantMean], margin: float) -> List[ComparisonRow]:
    A_fixed = float(np.mean([m.A for m in means]))
    base = next((m for m in means if m.variant == "scalerl"), means[0])
    rows = []
    for m in means:
        dA, dB = m.A - base.A, m.B - base.B
        verdict = ("base" if m is base else "lower ceiling" if dA < -margin
                   else "lower efficiency" if dB < 0 else "within margin")
        rows.append(ComparisonRow("loo", sweep, m.variant, A=m.A, B=m.B, C_mid=m.C_mid,
                                  axis="" if m is base else m.variant.split("=")[0], dA=dA,
                                  A_fixed=A_fixed, B_fixed=m.B, dB=dB, verdict=verdict))
    return rows
