"""The plan as terminal tables (``rlscale plan`` and ``rlscale report`` when plan.json exists)."""
from __future__ import annotations

from typing import List

from rich.table import Table

from rlscale.fit.schema import axis_label


def _interval(lo, hi) -> str:
    return "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def plan_tables(plan: dict) -> List[Table]:
    """One table per sweep of a plan.json mapping: variants by tier, then the crossovers and the best
    setting in the caption."""
    tables = []
    for sweep in plan.get("sweeps", []):
        best = sweep["best"]
        title = (f"plan {sweep['sweep']} at {sweep['budget']:.4g} {axis_label(sweep['x'])}: "
                 + (f"best {best[0]}" if len(best) == 1 else f"tie between {', '.join(best)}"))
        table = Table(title=title)
        for col in ("tier", "variant", "predicted", f"{100 * plan.get('ci_level', 0.95):.0f} % interval", "seeds",
                    *sweep["scaling_keys"], "note"):
            table.add_column(col)
        for v in sweep["variants"]:
            table.add_row(str(v["tier"]), v["variant"], f"{v['predicted']:.3f}", _interval(v["lo"], v["hi"]),
                          str(v["seeds"]), *[v["setting"].get(k, "") for k in sweep["scaling_keys"]],
                          "" if v["identified"] else "A not identified: extrapolation")
        lines = [f"{c['before']} leads below {c['x']:.4g}, {c['after']} above (reward {c['reward']:.3f})"
                 for c in sweep["crossovers"]]
        if sweep["best_setting"]:
            lines.append("best setting: " + "; ".join(", ".join(f"{k}={v}" for k, v in s.items())
                                                      for s in sweep["best_setting"]))
        table.caption = "\n".join(lines) or "no crossover before the budget"
        tables.append(table)
    return tables
