"""The check of a plan as the terminal shows it (``rlscale confirm``) and as rows the report's page reuses:
per sweep, a table of the settings (prediction interval, observed mean of the later runs, hit or miss, tier)
and a table of the pairs compared (observed difference, Holm, verdict)."""
from __future__ import annotations

from typing import List, Union

from rich.table import Table
from rich.text import Text

from rlscale.fit.results import axis_label
from rlscale.plan.view import compute
from rlscale.runfolder.names import printable_tree
from rlscale.tables import WrappingTable


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def interval_text(lo, hi) -> str:
    """"[lo, hi]", or "" without an interval."""
    return "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def difference_text(d: dict) -> str:
    """An observed difference with its interval, "+0.012 [-0.004, +0.028]" (no interval: the value alone)."""
    text = f"{d['value']:+.3f}"
    return text if d["lo"] is None or d["hi"] is None else f"{text} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def confirm_title(sweep: dict) -> str:
    """"confirm SWEEP at C UNIT: tiers held" (or not held, unresolved, not compared)."""
    return f"confirm {sweep['sweep']} at {compute(sweep['budget'])} {axis_label(sweep['x'])}: {sweep['tiers']}"


def runs_text(setting: dict) -> str:
    """"3 new" / "2 new + 1 extended" / "0"."""
    parts = [f"{setting[k]} {k}" for k in ("new", "extended") if setting[k]]
    return " + ".join(parts) or "0"


def pair_text(pair: dict) -> str:
    """"A > B" for a pair the plan put in different tiers, "A = B" for a tie."""
    return f"{pair['higher']} {'>' if pair['planned'] == 'ahead' else '='} {pair['lower']}"


def holm_text(pair: dict) -> str:
    """The pair's p-value and whether Holm resolves it; "-" when untested."""
    if pair["p_value"] is None:
        return "-"
    return f"p={pair['p_value']:.2g}, {'resolved' if pair['resolved'] else 'not resolved'}"


def confirm_view(check: dict) -> List[Union[Text, Table]]:
    """Per sweep of a confirm.json mapping: the settings table, the pairs table (when two settings were
    observed), then a line on the runs that match no setting; names ``printable``."""
    check = printable_tree(check)
    level = f"{100 * check['ci_level']:.0f} %"
    out: List[Union[Text, Table]] = []
    for sweep in check["sweeps"]:
        table = WrappingTable(title=Text(confirm_title(sweep)))
        for col in ("tier", "variant", "predicted", f"{level} prediction", "observed", "runs", "verdict",
                    "tier held", "note"):
            table.add_column(col)
        for s in sweep["settings"]:
            table.add_row(str(s["tier"]), Text(s["variant"]), _num(s["predicted"]), interval_text(s["lo"], s["hi"]),
                          _num(s["observed"]), runs_text(s), s["verdict"], s["tier_verdict"], Text(s["note"]))
        out.append(table)
        if sweep["pairs"]:
            tested = sum(p["p_value"] is not None for p in sweep["pairs"])
            family = f"{tested} pair{'' if tested == 1 else 's'} tested, at {100 * (1 - check['ci_level']):.0f} %"
            pairs = WrappingTable(title=Text(f"{sweep['sweep']}: pairs in plan order (Holm over {family})"))
            for col in ("pair", "observed difference", "order", "test", "verdict"):
                pairs.add_column(col)
            for p in sweep["pairs"]:
                pairs.add_row(Text(pair_text(p)), difference_text(p["difference"]), p["order"], holm_text(p),
                              p["verdict"])
            out.append(pairs)
    if check["unmatched"]:
        out.append(Text(f"{len(check['unmatched'])} runs match no setting of the plan (left out)"))
    return out
