"""``rlscale confirm``: a plan's predictions checked against runs it was not fitted on (the paper's check of
an extrapolation: fit on part of the budget, compare with what the runs reach, Section 5).

Runs are matched to the plan's settings by sweep and variant name (as ``rlscale fit`` names them:
sweep.json's variant names, else the folder name without ``_s<N>``). Each run is

- ``new seed``: a seed the plan did not see, whose evals reach the budget;
- ``extended``: a seed the plan saw, whose fit stopped below the budget (its last eval then, or
  ``--fit-until``), now with evals at the budget;
- ``seen seed: not new evidence``: a seed the plan saw whose evals go no further than its fit saw, or whose
  fit saw the budget already (the plan was fitted on them);
- ``not reached``: a run whose last eval is below the budget (a new seed, or a seen seed run on past what its
  fit saw but not to the budget): not compared;
- ``duplicate: left out``: a second run of the same variant and seed (the one reaching furthest is kept).

Per setting: the observed reward of each evidence run at the budget (rlscale.plan.observed), their mean, and
the plan's prediction interval for the mean of those runs (rlscale.plan.new_seeds: the width plan.json's
``new_seeds`` gives for k new seeds, here for the n new and extended runs at hand and their eval noise):
``hit`` when the mean lies in it, else ``miss``; ``no interval`` when the plan has none (its reason),
``not reached`` when no run reached the budget, ``no new runs`` when none is evidence.

Tiers: every pair of settings with evidence is compared on the observed values (unpaired seed means, the
seed spread pooled over the sweep's settings, rlscale.fit.differences); a pair's difference is resolved when
its t-test rejects 0 under Holm's step-down over all the pairs of the sweep compared (family-wise level
1 - ci_level). A pair the plan put in different tiers ``held`` (observed in the plan's order, resolved),
is ``reversed`` (resolved the other way) or ``unresolved``; a pair the plan tied is ``within margin`` (the
observed interval inside +- margin), ``separated`` (resolved and beyond the margin, the plan's rule of a
separation) or ``unresolved``. A tie is the plan's "not resolved", not a claim that the settings are equal, so
a tie that the new runs separate does not contradict it: it was coarser than the new runs can tell. A setting's
tier is ``not held`` when one of its pairs reversed, ``unresolved`` when a pair the plan separated is not resolved
by the new runs, ``refined`` when every separation held and a tie separated, ``held`` when every separation held
and every tie stayed within the margin or unresolved (with at least one pair held or within the margin), else
``unresolved``; the sweep's tiers likewise (``tiers held``, ``tiers not held``, ``tiers unresolved``, ``tiers
refined``; ``tiers not compared`` with fewer than two settings observed).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Dict, List, Optional, Sequence, Tuple


from rlscale.fit.curves import Curve
from rlscale.fit.differences import Pooled, Samples, difference
from rlscale.fit.family import holm_adjusted, p_beyond
from rlscale.fit.results import Difference
from rlscale.plan.new_seeds import eval_variances, mean_interval
from rlscale.plan.observed import AtBudget, at_budget

CONFIRM_JSON = "confirm.json"
NEW_SEED, EXTENDED, SEEN, NOT_REACHED, DUPLICATE = (
    "new seed", "extended", "seen seed: not new evidence", "not reached", "duplicate: left out")
HIT, MISS, NO_INTERVAL, NO_RUNS = "hit", "miss", "no interval", "no new runs"
HELD, REVERSED, UNRESOLVED, WITHIN, SEPARATED = "held", "reversed", "unresolved", "within margin", "separated"
NOT_HELD, REFINED = "not held", "refined"
AHEAD, TIED = "ahead", "tied"
EVIDENCE = (NEW_SEED, EXTENDED)
_TOP_KEYS = ("x", "margin", "ci_level")
_PLAN_KEYS = ("sweep", "budget", "x", "variants")
_VARIANT_KEYS = ("variant", "tier", "predicted", "seen", "new_seeds")
_NEW_SEEDS_KEYS = ("seen", "sd", "df", "eval_se", "reason")


class PlanError(ValueError):
    """The file is not a plan.json of ``rlscale plan`` (or one without the fields a check needs)."""


@dataclass(frozen=True)
class RunCheck:
    """One later run of a planned setting: its last eval's compute (``reached``, None without evals), what
    it is to the plan (``status``, module docstring) and its observed reward at the budget."""

    variant: str
    seed: Optional[int]
    run_path: str
    reached: Optional[float]
    status: str
    observed: Optional[float]


@dataclass(frozen=True)
class SettingCheck:
    """A setting's prediction and what its ``n`` evidence runs (``new`` seeds, ``extended`` seen seeds)
    showed: the plan's ``predicted`` mean and its prediction interval [lo, hi] for those runs, their
    ``observed`` mean, ``verdict`` (hit, miss, ...), its ``tier_verdict`` and a ``note`` (runs left out, why
    there is no interval)."""

    variant: str
    tier: int
    predicted: float
    lo: Optional[float]
    hi: Optional[float]
    n: int
    new: int
    extended: int
    observed: Optional[float]
    verdict: str
    tier_verdict: str
    note: str


@dataclass(frozen=True)
class PairCheck:
    """Two observed settings, ``higher`` the one the plan put first: ``planned`` ahead (different tiers) or
    tied; the observed ``difference`` higher - lower with its interval, its ``order`` (same or reversed),
    its t-test ``p_value``, whether Holm resolves it, and the ``verdict``."""

    higher: str
    lower: str
    planned: str
    difference: Difference
    order: str
    p_value: Optional[float]
    resolved: bool
    verdict: str


@dataclass(frozen=True)
class SweepCheck:
    """The check of one sweep's plan at its budget."""

    sweep: str
    budget: float
    x: str
    settings: List[SettingCheck]
    pairs: List[PairCheck]
    tiers: str
    runs: List[RunCheck]


def read_plan(plan: object) -> dict:
    """``plan`` (parsed plan.json) when it is a plan with new-seed predictions; else PlanError."""
    if not isinstance(plan, dict) or not isinstance(plan.get("sweeps"), list) or not all(
            k in plan for k in _TOP_KEYS):
        raise PlanError("not a plan.json of rlscale plan")
    for sweep in plan["sweeps"]:
        if not (isinstance(sweep, dict) and all(k in sweep for k in _PLAN_KEYS)
                and isinstance(sweep["variants"], list) and all(_is_setting(v) for v in sweep["variants"])):
            raise PlanError("a plan without the seeds it saw and its new-seed predictions; rerun rlscale plan")
    return plan


def _is_setting(variant: object) -> bool:
    return (isinstance(variant, dict) and all(k in variant for k in _VARIANT_KEYS)
            and isinstance(variant["seen"], list) and all(isinstance(s, dict) and "seed" in s and "up_to" in s
                                                          for s in variant["seen"])
            and isinstance(variant["new_seeds"], dict) and all(k in variant["new_seeds"] for k in _NEW_SEEDS_KEYS))


def confirm(plan: dict, curves: Sequence[Curve]) -> Tuple[List[SweepCheck], List[str]]:
    """The check of every sweep of ``plan`` against ``curves``, and the run paths of the curves that match no
    setting of the plan."""
    planned = {(s["sweep"], v["variant"]) for s in plan["sweeps"] for v in s["variants"]}
    checks = [_check_sweep(s, [c for c in curves if c.sweep == s["sweep"]], plan) for s in plan["sweeps"]]
    return checks, [c.run_path for c in curves if (c.sweep, c.variant) not in planned]


def _check_sweep(sweep: dict, curves: List[Curve], plan: dict) -> SweepCheck:
    budget, level = sweep["budget"], plan["ci_level"]
    runs = {v["variant"]: _runs(v, [c for c in curves if c.variant == v["variant"]], budget) for v in sweep["variants"]}
    observed = {name: [r.observed for r, _ in rs if r.status in EVIDENCE] for name, rs in runs.items()}
    pairs = _pairs(sweep["variants"], observed, plan["margin"], level)
    settings = [_setting(v, runs[v["variant"]], level, [p for p in pairs if v["variant"] in (p.higher, p.lower)])
                for v in sweep["variants"]]
    return SweepCheck(sweep=sweep["sweep"], budget=budget, x=sweep["x"], settings=settings, pairs=pairs,
                      tiers=_sweep_tiers(pairs), runs=[r for rs in runs.values() for r, _ in rs])


def _runs(variant: dict, curves: List[Curve], budget: float) -> List[Tuple[RunCheck, Optional[AtBudget]]]:
    """Each run of a setting with its status (module docstring) and its reward at the budget, in the order
    given."""
    seen = {s["seed"]: s["up_to"] for s in variant["seen"]}
    furthest: Dict[int, int] = {}
    for i, c in enumerate(curves):
        if c.seed is not None and (c.seed not in furthest or _last(c) > _last(curves[furthest[c.seed]])):
            furthest[c.seed] = i
    out = []
    for i, c in enumerate(curves):
        value = at_budget(c.x, c.y, c.se, budget)
        if c.seed is not None and furthest[c.seed] != i:
            status = DUPLICATE
        elif c.seed in seen:
            status = _seen_status(seen[c.seed], _last(c), value is not None, budget)
        else:
            status = NEW_SEED if value is not None else NOT_REACHED
        value = value if status in EVIDENCE else None
        out.append((RunCheck(variant=c.variant, seed=c.seed, run_path=c.run_path,
                             reached=float(c.x.max()) if c.x.size else None, status=status,
                             observed=None if value is None else value.value), value))
    return out


def _seen_status(up_to: float, last: float, reached: bool, budget: float) -> str:
    """A seen seed's run: extended when its fit stopped below the budget and it now reaches it, not reached
    when it goes past what its fit saw but not to the budget, else seen (module docstring)."""
    if up_to >= budget * (1 - 1e-9) or last <= up_to * (1 + 1e-9):
        return SEEN
    return EXTENDED if reached else NOT_REACHED


def _last(curve: Curve) -> float:
    return float(curve.x.max()) if curve.x.size else -math.inf


def _setting(variant: dict, runs: List[Tuple[RunCheck, Optional[AtBudget]]], level: float,
             pairs: List[PairCheck]) -> SettingCheck:
    """A setting's verdict (module docstring); ``pairs``: the pairs it is part of."""
    evidence = [(r, a) for r, a in runs if a is not None]
    new = sum(r.status == NEW_SEED for r, _ in evidence)
    prediction = variant["new_seeds"]
    statuses = [r.status for r, _ in runs]
    notes = [f"{s} ({statuses.count(s)})" for s in (NOT_REACHED, SEEN, DUPLICATE) if s in statuses]
    lo = hi = observed = None
    if not evidence:
        verdict = NOT_REACHED if NOT_REACHED in statuses else NO_RUNS
    else:
        observed = statistics.fmean(r.observed for r, _ in evidence)
        if prediction["sd"] is None or prediction["eval_se"] is None:
            verdict = NO_INTERVAL
            notes.append(prediction["reason"])
        else:
            noise = eval_variances([a.factor for _, a in evidence], [a.eval_variance for _, a in evidence],
                                   prediction["eval_se"])
            lo, hi = mean_interval(variant["predicted"], prediction["sd"], prediction["df"], prediction["seen"], new,
                                   len(evidence) - new, noise, level)
            verdict = HIT if lo <= observed <= hi else MISS
    return SettingCheck(variant=variant["variant"], tier=variant["tier"], predicted=variant["predicted"], lo=lo,
                        hi=hi, n=len(evidence), new=new, extended=len(evidence) - new, observed=observed,
                        verdict=verdict, tier_verdict=_tier_verdict(pairs), note="; ".join(notes))


def _pairs(variants: List[dict], observed: Dict[str, List[float]], margin: float, level: float) -> List[PairCheck]:
    """Every pair of observed settings in plan order, its difference resolved under Holm (module docstring)."""
    shown = [v for v in variants if observed[v["variant"]]]
    pooled = Pooled.of([observed[v["variant"]] for v in shown])
    rows = []
    for p, q in combinations(shown, 2):
        a, b = observed[p["variant"]], observed[q["variant"]]
        d = difference(Samples(a, None), Samples(b, None), pooled, level)
        rows.append((p, q, d, p_beyond(d, 0.0) if d.se is not None else None))
    adjusted_p = holm_adjusted([row[3] for row in rows])
    return [_pair(p, q, d, p_value, adj is not None and adj <= 1 - level, margin)
            for (p, q, d, p_value), adj in zip(rows, adjusted_p)]


def _pair(p: dict, q: dict, d: Difference, p_value: Optional[float], resolved: bool, margin: float) -> PairCheck:
    planned = AHEAD if p["tier"] < q["tier"] else TIED
    if planned == AHEAD:
        verdict = (HELD if d.value > 0 else REVERSED) if resolved else UNRESOLVED
    else:
        verdict = SEPARATED if resolved and abs(d.value) > margin else WITHIN if d.inside(margin) else UNRESOLVED
    return PairCheck(higher=p["variant"], lower=q["variant"], planned=planned, difference=d,
                     order="same" if d.value > 0 else "reversed", p_value=p_value, resolved=resolved, verdict=verdict)


def _tier_verdict(pairs: List[PairCheck]) -> str:
    """held, not held, unresolved or refined over ``pairs`` (module docstring); "" without any."""
    if not pairs:
        return ""
    if any(p.verdict == REVERSED for p in pairs):
        return NOT_HELD
    if any(p.planned == AHEAD and p.verdict != HELD for p in pairs):
        return UNRESOLVED
    if any(p.verdict == SEPARATED for p in pairs):
        return REFINED
    return HELD if any(p.verdict in (HELD, WITHIN) for p in pairs) else UNRESOLVED


def _sweep_tiers(pairs: List[PairCheck]) -> str:
    return f"tiers {_tier_verdict(pairs) or 'not compared'}"


def confirm_json(checks: Sequence[SweepCheck], plan: dict, plan_path: str, unmatched: Sequence[str]) -> dict:
    """confirm.json's content."""
    return {"plan": plan_path, "x": plan.get("x"), "y": plan.get("y", "val_reward"), "margin": plan["margin"],
            "ci_level": plan["ci_level"], "sweeps": [asdict(c) for c in checks], "unmatched": list(unmatched)}
