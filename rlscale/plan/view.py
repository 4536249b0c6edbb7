"""The plan as the terminal shows it (``rlscale plan``, and ``rlscale report`` when plan.json exists) and as
lines the report's page reuses: per sweep, the budget warning, the variants by tier with the prediction
interval of their new seeds, and at most one line per variant for the crossovers (plan.json keeps every one)."""
from __future__ import annotations

from typing import List, Union

from rich.table import Table
from rich.text import Text

from rlscale.fit.results import axis_label
from rlscale.plan.planner import Crossings, Crossover, crossings
from rlscale.runfolder.names import printable_tree
from rlscale.tables import WrappingTable


def _interval(lo, hi) -> str:
    return "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def plan_view(plan: dict) -> List[Union[Text, Table]]:
    """Per sweep of a plan.json mapping: its warning (one line, when there is one), a table of the
    variants by tier, then the crossover lines and the best setting (notes); names from folders are shown
    ``printable``."""
    plan = printable_tree(plan)
    out: List[Union[Text, Table]] = []
    for sweep in plan.get("sweeps", []):
        if sweep["warning"]:
            out.append(Text(f"warning: {sweep['sweep']}: {sweep['warning']}", style="yellow"))
        out.append(_table(sweep, plan.get("ci_level", 0.95)))
        out += [Text(line) for line in notes(sweep)]
    return out


def compute(x: float) -> str:
    """A compute value for reading: thousands separators, scientific notation beyond a million or below one."""
    return f"{x:,.0f}" if 1 <= abs(x) < 1e6 else f"{x:.3g}"


def title(sweep: dict) -> str:
    """"plan SWEEP at C UNIT: best V" (or the tie)."""
    best = sweep["best"]
    return (f"plan {sweep['sweep']} at {compute(sweep['budget'])} {axis_label(sweep['x'])}: "
            + (f"best {best[0]}" if len(best) == 1 else f"tie between {', '.join(best)}"))


def notes(sweep: dict) -> List[str]:
    """The crossover lines (crossover_lines) and the best setting of a scaling sweep."""
    lines = [f"tiers: {sweep['family']}"] if sweep.get("family") else []
    lines += crossover_lines(sweep)
    if sweep["best_setting"]:
        lines.append("best setting: " + "; ".join(", ".join(f"{k}={v}" for k, v in s.items())
                                                  for s in sweep["best_setting"]))
    return lines


def crossover_lines(sweep: dict) -> List[str]:
    """At most one line per variant, in tier order: its first overtaking and its first being overtaken past
    the largest observed compute (where the curves are predictions), then one line counting them all."""
    found = [Crossover(**c) for c in sweep["crossovers"]]
    if not found:
        return ["no crossover before the budget"]
    past = sweep["observed_max"]
    order = [v["variant"] for v in sweep["variants"]]
    lines = [_crossing_line(c) for c in crossings(found, order, past)]
    within = sum(c.x <= past for c in found)
    lines.append(f"{_count(len(found))} before the budget ({within} within the observed compute, up to "
                 f"{compute(past)}); plan.json lists them all")
    return lines


def _crossing_line(c: Crossings) -> str:
    parts = [f"overtakes {c.overtakes.before} at {compute(c.overtakes.x)}" if c.overtakes else "",
             f"is overtaken by {c.overtaken.after} at {compute(c.overtaken.x)}" if c.overtaken else ""]
    return f"{c.variant}: {', '.join(p for p in parts if p)} ({_count(c.count)} in all)"


def _count(n: int) -> str:
    return f"{n} crossover{'' if n == 1 else 's'}"


def new_seeds_header(sweep: dict, ci_level: float) -> str:
    """The column of the new-seed prediction: "mean of K new seeds (95 % prediction)"; "" for a plan
    without it."""
    ks = {v["new_seeds"]["k"] for v in sweep["variants"] if v.get("new_seeds")}
    return f"mean of {'/'.join(map(str, sorted(ks)))} new seeds ({100 * ci_level:.0f} % prediction)" if ks else ""


def new_seeds_text(variant: dict) -> str:
    """The prediction interval of a variant's new seeds, or "no interval" when there is none (plan.json
    holds the reason)."""
    new = variant.get("new_seeds") or {}
    return _interval(new.get("lo"), new.get("hi")) or ("no interval" if new else "")


def _table(sweep: dict, ci_level: float) -> Table:
    table = WrappingTable(title=Text(title(sweep)))
    header = new_seeds_header(sweep, ci_level)
    extra = [header] if header else []
    for col in ("tier", "variant", "predicted", f"{100 * ci_level:.0f} % interval", "seeds", *extra,
                *sweep["scaling_keys"], "note"):
        table.add_column(col)
    for v in sweep["variants"]:
        table.add_row(str(v["tier"]), Text(v["variant"]), f"{v['predicted']:.3f}", _interval(v["lo"], v["hi"]),
                      str(v["seeds"]), *([new_seeds_text(v)] if header else []),
                      *[v["setting"].get(k, "") for k in sweep["scaling_keys"]],
                      "" if v["identified"] else "A not identified: extrapolation")
    return table
