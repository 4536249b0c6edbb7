"""The terminal view of a FitResults: one table of runs (messages listed under it, then the runs whose curve is
not a sigmoid, rlscale.fit.misfit), then per sweep the
eval-noise flag, the ranking and the LOO table.

Runs fitted with ``--fit-until`` get a second table: the prediction of the held-out mean with its prediction
interval, each method's error (sigmoid, carry-forward, power law) and the best of the three
(rlscale.fit.forecast), and each sweep one line summarizing them.

A is shown with its interval (the profile interval, widened for correlated residuals and the eval set's
offset) and the paper's +-margin next to it (App. A.7), so a reader can see whether the data's own uncertainty is wider or narrower
than the paper's rule of thumb; every ranking difference and LOO verdict is shown with its interval and the
interval's source (paired or unpaired seeds).
"""
from __future__ import annotations

from typing import List, Optional

from rich.console import Console
from rich.table import Table

from rlscale.fit.compare import table_family
from rlscale.fit.forecast import best_text, summarize
from rlscale.fit.noise import eval_noise
from rlscale.fit.results import ComparisonRow, FitResults, FitSettings, RunFit, axis_label
from rlscale.runfolder.names import printable, shown
from rlscale.tables import WrappingTable

_STATUS_STYLE = {"ok": "green", "repaired": "green", "flat": "yellow", "too_few_points": "yellow", "diverging": "yellow"}


def render(results: FitResults, console: Console) -> None:
    s = results.settings
    console.print(_runs_table(results))
    for r in results.runs:
        if r.message:
            console.print(printable(f"  {_name(r, results)}: {r.message}"), markup=False, highlight=False)
    checked = [r for r in results.runs if r.extrap_lo is not None]
    if checked:
        console.print(_extrapolation_table(checked, results))
    for sweep in sorted({r.sweep for r in checked}):
        summary = summarize([r for r in checked if r.sweep == sweep], s.ci_level)
        if summary is not None:
            console.print(printable(f"{sweep or 'runs'}: extrapolation: {summary.describe()}"), markup=False,
                          highlight=False)
    misfits = [r for r in results.runs if r.misfit]
    if misfits:
        console.print("curves that are not sigmoids (rlscale.fit.misfit; still fitted, A and B describe Eq. 1 only):",
                      style="yellow", markup=False, highlight=False)
    for r in misfits:
        console.print(printable(f"  {_name(r, results)}: {r.misfit} ({_misfit_stats(r)})"), markup=False,
                      highlight=False)
    for sweep in sorted({c.sweep for c in results.comparison}):
        rows = [c for c in results.comparison if c.sweep == sweep]
        noise = eval_noise(results.runs, sweep, s.margin, s.paired)
        if noise is not None and noise.flagged:
            console.print(printable(f"{sweep or 'runs'}: {noise.describe()}"), style="yellow", markup=False,
                          highlight=False)
        for kind, label in (("rank", "ranking"), ("loo", "leave-one-out")):
            table = [c for c in rows if c.kind == kind]
            if not table:
                continue
            console.print(_ranking_table(sweep, table, results) if kind == "rank" else _loo_table(sweep, table, s))
            line = table_family(table, s)
            if line:
                console.print(f"  {label}: {line}", markup=False, highlight=False)
    pairing = "paired by seed where variants share seeds, else" if s.paired else "unpaired:"
    console.print(f"method {s.method}; x = {axis_label(s.x)} ({s.x}), y = {s.y}; cutoff: {s.cutoff_rule}; "
                  f"{s.ci_level:.0%} intervals: A of a run from its profile (widened for correlated residuals and "
                  f"the eval set's offset), B and C_mid by bootstrap ({s.n_boot} resamples, seed {s.seed}), "
                  "predictions as prediction intervals (PI) of an eval there (rlscale.fit.forecast); "
                  f"differences {pairing} seed means, the spread pooled over the sweep; +-{s.margin:g}: "
                  "the paper's margin on A",
                  markup=False, highlight=False)


def _runs_table(results: FitResults) -> Table:
    s = results.settings
    extrap = s.fit_until is not None or s.fit_until_frac is not None
    ok = sum(r.fitted for r in results.runs)
    table = WrappingTable(title=f"Eq. 1 fits: {ok} of {len(results.runs)} runs ok")
    se = any(r.eval_se is not None for r in results.runs)
    columns: List[str] = ["run", "n", "cutoff", "R0", f"A [{s.ci_level:.0%} CI] +-{s.margin:g}", "A id", "B [CI]",
                          "C_mid", "R2"] + ["eval SE"] * se
    columns += ["|err| sigmoid/power"] if extrap else []
    columns += [f"R@{c:g} [PI] obs" for c in s.predict_at] + ["status"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("run", "status") else "right")
    for r in results.runs:
        identified = {None: "-", True: "yes", False: "[yellow]no[/yellow]"}[r.A_identified]
        row = [shown(_name(r, results)), str(r.n_points), _f(r.cutoff, ".4g"), _f(r.R0, ".3f"),
               _ci(r.A, r.A_lo, r.A_hi, ".3f"), identified,
               _ci(r.B, r.B_lo, r.B_hi, ".2f"), _f(r.C_mid, ".4g"), _f(r.r2, ".3f")] + [_f(r.eval_se, ".3g")] * se
        if extrap:
            law = r.power_law.extrap_abs_err if r.power_law else None
            row.append(f"{_f(r.extrap_abs_err, '.3f')}/{_f(law, '.3f')}")
        predictions = {p.x: p for p in r.predictions}
        row += [_prediction(predictions.get(c)) for c in s.predict_at]
        style = _STATUS_STYLE.get(r.status, "red")
        row.append(f"[{style}]{r.status}[/{style}]")
        table.add_row(*row)
    return table


def _ranking_table(sweep: str, rows: List[ComparisonRow], results: FitResults) -> Table:
    s: FitSettings = results.settings
    table = WrappingTable(title=f"{shown(sweep or 'runs')}: ranked by A in tiers (a new tier where dA is beyond "
                        f"+-{s.margin:g} and resolved), then by B at the tier's mean A; '=' marks ties")
    for col in ("#", "variant", "A (seed sd)", "dA [CI]", "B (seed sd)", "dB [CI] at fixed A", "interval", "note"):
        table.add_column(col, justify="left" if col in ("variant", "note", "interval") else "right")
    spread = {(r.sweep, r.variant): r for r in results.runs if r.seed_std_A is not None}
    for c in rows:
        seeds = spread.get((c.sweep, c.variant))
        rank = "-" if c.rank is None else f"{c.rank}{'=' if c.tie else ''}"
        table.add_row(rank, shown(c.variant), _f(c.A, ".3f") + (f" ({seeds.seed_std_A:.3f})" if seeds else ""),
                      _ci(c.dA, c.dA_lo, c.dA_hi, "+.3f"),
                      _f(c.B, ".2f") + (f" ({seeds.seed_std_B:.2f})" if seeds else ""),
                      _ci(c.dB, c.dB_lo, c.dB_hi, "+.2f"), c.interval_source, shown(c.note))
    return table


def _loo_table(sweep: str, rows: List[ComparisonRow], s: FitSettings) -> Table:
    table = WrappingTable(title=f"{shown(sweep)}: leave-one-out, {loo_caption(rows, s)}")
    for col in ("variant", "axis", "A", "dA [CI]", "B@A", "dB [CI]", "interval", "p alone/adj", "verdict"):
        table.add_column(col, justify="right" if col in ("A", "dA [CI]", "B@A", "dB [CI]", "p alone/adj") else "left")
    for c in rows:
        p = "-" if c.p_value is None else f"{c.p_value:.2g}/{_f(c.p_adjusted, '.2g')}"
        table.add_row(shown(c.variant), shown(c.axis or "-"), _f(c.A, ".3f"), _ci(c.dA, c.dA_lo, c.dA_hi, "+.3f"),
                      _f(c.B_fixed, ".2f"), _ci(c.dB, c.dB_lo, c.dB_hi, "+.2f"), c.interval_source, p,
                      shown(c.verdict_text or c.note))
    return table


def loo_caption(rows: List[ComparisonRow], s: FitSettings) -> str:
    """What a LOO table's verdicts rest on, from its rows: the fixed A (or why there is none), the ceiling and
    efficiency rules and the margins, with the band on dB as a number when the base has a B."""
    a_fixed = next((c.A_fixed for c in rows if c.A_fixed is not None), None)
    band = next((c.margin_B for c in rows if c.margin_B is not None), None)
    fixed = (f"B refit with A fixed at {a_fixed:.3f}, the mean of the identified runs" if a_fixed is not None else
             "no run's A is identified, so no B at a fixed A")
    band_text = (f"+-{band:.2f} ({s.margin_b:.0%} of the base's B)" if band is not None else
                 f"{s.margin_b:.0%} of the base's B (no band: the base has no B at the fixed A)")
    return (f"{fixed}; ceiling: |dA| > {s.margin:g}, efficiency: dB (and the free fits' B), each with an interval "
            "excluding 0 at the level the table's family leaves it (below); within margin: dA inside "
            f"+-{s.margin:g} and dB inside {band_text}")


def _misfit_stats(r: RunFit) -> str:
    """The misfit test's step p-value and power-law log-likelihood ratio."""
    return f"step p {_f(r.misfit_p, '.2g')}, power law log-LR {_f(r.misfit_llr, '+.1f')}"


def _name(r: RunFit, results: FitResults) -> str:
    several_sweeps = len({run.sweep for run in results.runs}) > 1
    name = f"{r.sweep}/{r.variant}" if several_sweeps and r.sweep else r.variant
    return name if r.seed is None else f"{name} s{r.seed}"


def _extrapolation_table(runs: List[RunFit], results: FitResults) -> Table:
    """The runs checked beyond fit_until: the sigmoid's prediction of the held-out mean with its prediction
    interval, the observation, each method's |error| and the best (rlscale.fit.forecast)."""
    level = results.settings.ci_level
    table = WrappingTable(title=f"Extrapolation: mean of the last evals beyond fit_until, sigmoid with its {level:.0%} "
                        "prediction interval (PI); carry-forward: the mean of the last 3 fitted evals")
    for col in ("run", f"sigmoid [{level:.0%} PI]", "observed", "|err| sigmoid", "|err| carry-forward",
                "|err| power law", "best"):
        table.add_column(col, justify="left" if col in ("run", "best") else "right")
    for r in runs:
        law = r.power_law.extrap_abs_err if r.power_law else None
        table.add_row(shown(_name(r, results)), _ci(r.extrap_predicted, r.extrap_lo, r.extrap_hi, ".3f"),
                      _f(r.extrap_observed, ".3f"), _f(r.extrap_abs_err, ".3f"), _f(r.extrap_cf_abs_err, ".3f"),
                      _f(law, ".3f"), best_text(r) or "-")
    return table


def _prediction(p) -> str:
    if p is None:
        return "-"
    return _ci(p.y, p.lo, p.hi, ".3f") + (f" {p.observed:.3f}" if p.observed is not None else "")


def _ci(value: Optional[float], lo: Optional[float], hi: Optional[float], spec: str) -> str:
    if value is None:
        return "-"
    return _f(value, spec) + (f" [{lo:{spec}},{hi:{spec}}]" if lo is not None and hi is not None else "")


def _f(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)
