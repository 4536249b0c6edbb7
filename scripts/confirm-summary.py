#!/usr/bin/env python
"""The markdown tables of one or more confirm.json files of ``rlscale confirm``, for an example's README.

Per setting: the plan's tier and prediction at the budget, its 95 % prediction interval for the mean of the
evidence runs, the observed mean with each run's value (by seed), the verdict (hit or miss) and whether the
setting's tier held. Per pair: the plan's relation, the observed difference with its interval, the test under
Holm and the verdict. Every number and word is read from confirm.json (docs/commands.md, ``rlscale confirm``);
nothing is recomputed.

Usage: ``python scripts/confirm-summary.py LABEL=CONFIRM_JSON [LABEL=CONFIRM_JSON ...]``
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List


def _interval(lo, hi) -> str:
    return "-" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def tables(label: str, confirm: dict) -> List[str]:
    """The markdown lines of one confirm.json: a settings table and a pairs table per sweep."""
    lines: List[str] = []
    level = f"{confirm['ci_level'] * 100:g}"
    for sweep in confirm["sweeps"]:
        by_variant = {}
        for run in sweep["runs"]:
            if run["observed"] is not None and run["status"] in ("new seed", "extended"):
                by_variant.setdefault(run["variant"], []).append(run)
        lines += [f"**{label}** (`{confirm['plan']}`), sweep {sweep['sweep']} at C = {sweep['budget']:.3g}: "
                  f"{sweep['tiers']}", "",
                  f"| setting | plan tier | predicted | {level} % prediction, mean of the new seeds | observed mean "
                  "(per seed) | verdict | tier held |",
                  "|---|---|---|---|---|---|---|"]
        for s in sweep["settings"]:
            if s["verdict"] == "no new runs":
                continue
            runs = sorted(by_variant.get(s["variant"], []), key=lambda r: r["seed"])
            seeds = ", ".join(f"s{r['seed']} {r['observed']:.3f}" for r in runs)
            observed = "-" if s["observed"] is None else f"{s['observed']:.3f} ({seeds})"
            lines.append(f"| {s['variant']} | {s['tier']} | {s['predicted']:.3f} | {_interval(s['lo'], s['hi'])} | "
                         f"{observed} | {s['verdict']} | {s['tier_verdict'] or '-'} |")
        if sweep["pairs"]:
            lines += ["", f"| pair (plan) | observed difference [{level} % CI] | order | test (Holm) | verdict |",
                      "|---|---|---|---|---|"]
            for p in sweep["pairs"]:
                relation = ">" if p["planned"] == "ahead" else "="
                d = p["difference"]
                test = "-" if p["p_value"] is None else \
                    f"p={p['p_value']:.2g}, {'resolved' if p['resolved'] else 'not resolved'}"
                lines.append(f"| {p['higher']} {relation} {p['lower']} | {_signed(d['value'])} "
                             f"[{_signed(d['lo'])}, {_signed(d['hi'])}] | {p['order']} | {test} | {p['verdict']} |")
        lines.append("")
    return lines


def main(argv: List[str]) -> int:
    if not argv or any("=" not in a for a in argv):
        print("usage: confirm-summary.py LABEL=CONFIRM_JSON [LABEL=CONFIRM_JSON ...]", file=sys.stderr)
        return 2
    for arg in argv:
        label, path = arg.split("=", 1)
        print("\n".join(tables(label, json.loads(Path(path).read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
