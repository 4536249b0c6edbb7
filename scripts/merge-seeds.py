#!/usr/bin/env python
"""Add the runs of new seeds, trained in a sweep folder of their own (a device machine's results), to a committed
sweep of the same spec (an example of docs/examples/), so that ``rlscale fit`` reads every seed as one sweep.

Both folders hold a sweep.json of ``rlscale sweep``; they must agree on the sweep's name, kind, base and
overrides. Every finished run of NEW (status.json ``done``) whose folder DEST lacks is copied without checkpoints
(config.yaml, metrics.jsonl, samples.jsonl, status.json); a run DEST already holds is never touched. DEST's
sweep.json then lists its variants' runs in their order (each variant's seeds ascending) and its seed count,
written atomically. A run of NEW that did not finish is named and left out.

Usage: ``python scripts/merge-seeds.py NEW_SWEEP_DIR DEST_SWEEP_DIR``
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import List

from rlscale.runfolder.atomic import atomic_write_json

RUN_FILES = ("config.yaml", "metrics.jsonl", "samples.jsonl", "status.json")
SAME = ("name", "kind", "base", "overrides")


def merge(new: Path, dest: Path) -> List[str]:
    """Copy NEW's finished runs that DEST lacks and rewrite DEST's sweep.json; returns the copied runs' names."""
    spec_new, spec_dest = (json.loads((d / "sweep.json").read_text()) for d in (new, dest))
    differs = [k for k in SAME if spec_new.get(k) != spec_dest.get(k)]
    if differs:
        raise SystemExit(f"error: {new}/sweep.json differs from {dest}/sweep.json in {', '.join(differs)}")
    order = list(dict.fromkeys(v["name"] for v in spec_dest["variants"] + spec_new["variants"]))
    have = {v["run_dir"] for v in spec_dest["variants"]}
    variants, copied = list(spec_dest["variants"]), []
    for entry in spec_new["variants"]:
        run = entry["run_dir"]
        if run in have:
            continue
        status_file = new / run / "status.json"
        status = json.loads(status_file.read_text()).get("state") if status_file.exists() else None
        if status != "done":
            print(f"{run}: {status or 'not started'}, left out")
            continue
        (dest / run).mkdir()
        for name in RUN_FILES:
            if (new / run / name).exists():
                shutil.copy2(new / run / name, dest / run / name)
        variants.append(entry)
        copied.append(run)
    variants.sort(key=lambda v: (order.index(v["name"]), v["seed"]))
    atomic_write_json(dest / "sweep.json", {**spec_dest, "variants": variants,
                                            "seeds": len({v["seed"] for v in variants})})
    return copied


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    new, dest = (Path(a) for a in argv)
    for folder in (new, dest):
        if not (folder / "sweep.json").is_file():
            print(f"error: {folder}: no sweep.json (a sweep folder of rlscale sweep)", file=sys.stderr)
            return 2
    copied = merge(new, dest)
    print(f"{len(copied)} runs added to {dest}: {', '.join(copied) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
