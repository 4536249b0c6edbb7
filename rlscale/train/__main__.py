"""``python -m rlscale.train RUN_DIR``: train (or resume) the run whose resolved config is
``RUN_DIR/config.yaml``; what the generated sbatch scripts run (the submitit jobs call the same
``train_run_dir``). Under ``srun`` with several tasks each task is one trainer rank (rlscale.train.ranks):
rank 0 trains and writes the run folder, the others follow its learner calls. Exit status 0 when the run
ends done or diverged, 1 otherwise."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rlscale.train RUN_DIR (a folder holding config.yaml)", file=sys.stderr)
        return 2
    if not (Path(args[0]) / "config.yaml").is_file():
        print(f"{args[0]}: no config.yaml (usage: python -m rlscale.train RUN_DIR)", file=sys.stderr)
        return 2
    from rlscale.runfolder.errors import Refused
    from rlscale.train.entry import train_run_dir
    from rlscale.train.ranks import export_job_ranks

    export_job_ranks()
    try:
        state = train_run_dir(Path(args[0]))
    except Refused as err:
        print(f"rlscale: {err}", file=sys.stderr)
        return 1
    print(f"rlscale: run {args[0]} ended {state}")
    return 0 if state in ("done", "diverged") else 1


if __name__ == "__main__":
    sys.exit(main())
