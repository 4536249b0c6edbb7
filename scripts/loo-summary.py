#!/usr/bin/env python
"""The markdown tables of a leave-one-out study for its README, read from what ``rlscale fit`` wrote.

Per run (fits.csv, and the run's last eval from its metrics.jsonl): R0, A with its interval (``not identified``
where the interval reaches the edge of A's range), B and the last eval's reward, the variants in the sweep's
order and each variant's seeds ascending. Per reverted axis (comparison.csv's ``loo`` rows): dA and dB at the
base's common A with their intervals, the seeds each interval pairs (``interval_source``), and the verdict with
its reason and what would resolve it, under the correction the table made. Every number and word is read from
those files; nothing is refitted.

Usage: ``python scripts/loo-summary.py RESULTS [--y METRIC]`` (RESULTS: the folder ``rlscale fit`` wrote to;
``--y``: the metric of the per-run table's last eval, default val_reward)
"""
from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from typing import Dict, List


def _rows(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def last_eval(run: Path, y: str) -> str:
    values = [line[y] for line in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
              if line.get("kind") == "eval" and line.get(y) is not None]
    return f"{values[-1]:.3f}" if values else "-"


def per_run(results: Path, y: str) -> List[str]:
    fits = _rows(results / "fits.csv")
    order: Dict[str, int] = {}
    for sweep in dict.fromkeys(f["sweep"] for f in fits):
        spec = json.loads((results / sweep / "sweep.json").read_text())
        order.update({name: i for i, name in enumerate(dict.fromkeys(v["name"] for v in spec["variants"]))})
    lines = ["| run | R0 | A [95 % CI] | B | last eval |", "|---|---|---|---|---|"]
    for fit in sorted(fits, key=lambda f: (f["sweep"], order.get(f["variant"], 0), int(f["seed"] or 0))):
        unidentified = "" if fit["A_identified"] == "True" else ", not identified"
        lines.append(f"| {fit['variant']} s{fit['seed']} | {float(fit['R0']):.3f} | {float(fit['A']):.3f} "
                     f"[{float(fit['A_lo']):.3f}, {float(fit['A_hi']):.3f}]{unidentified} | {float(fit['B']):.2f} | "
                     f"{last_eval(results / fit['run_path'], y)} |")
    return lines


def pairs(source: str) -> str:
    """``dA paired n=5, dB paired n=6`` -> ``5, 6``; ``paired n=6`` -> ``6, 6``; unpaired counts keep the word."""
    found = re.findall(r"(unpaired|paired) n=([^,\s]+)", source)
    counts = [("" if kind == "paired" else "unpaired ") + n for kind, n in found]
    return ", ".join(counts * (2 if len(counts) == 1 else 1)) or "-"


def interval(value: str, lo: str, hi: str, digits: int) -> str:
    if not value:
        return "-"
    ends = f" [{float(lo):+.{digits}f}, {float(hi):+.{digits}f}]" if lo and hi else ""
    return f"{float(value):+.{digits}f}{ends}"


def loo(results: Path) -> List[str]:
    rows = [r for r in _rows(results / "comparison.csv") if r["kind"] == "loo"]
    lines = []
    for sweep in dict.fromkeys(r["sweep"] for r in rows):
        mine = [r for r in rows if r["sweep"] == sweep]
        base = next(r for r in mine if r["verdict"] == "base")
        axes = [r for r in mine if r["verdict"] != "base"]
        correction = {"holm": "Holm", "bonferroni": "Bonferroni"}.get(axes[0]["correction"], axes[0]["correction"])
        family = f"{correction} over {axes[0]['family_size']}" if axes[0]["correction"] != "none" else "no correction"
        lines += [f"| variant | dA [CI] | dB at A {float(base['A_fixed']):.3f} [CI] | pairs (dA, dB) | verdict "
                  f"({family}) |", "|---|---|---|---|---|"]
        for r in axes:
            verdict = (r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")
                       + (f": {r['needs']}" if r["needs"] else ""))
            lines.append(f"| {r['variant']} | {interval(r['dA'], r['dA_lo'], r['dA_hi'], 3)} | "
                         f"{interval(r['dB'], r['dB_lo'], r['dB_hi'], 2)} | {pairs(r['interval_source'])} | "
                         f"{verdict} |")
    return lines


def main(argv: List[str]) -> int:
    args = list(argv)
    y = "val_reward"
    if "--y" in args:
        i = args.index("--y")
        y = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or not (Path(args[0]) / "fits.csv").is_file():
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    results = Path(args[0])
    print("\n".join(["## Per run", ""] + per_run(results, y) + ["", "## Leave-one-out", ""] + loo(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
