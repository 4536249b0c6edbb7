"""Where the project's Hydra tree, sweep specs and sbatch template live (the repository checkout, or
``RLSCALE_HOME`` for an installed copy pointed at another tree)."""
from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(os.environ.get("RLSCALE_HOME", Path(__file__).resolve().parents[1]))
CONF_DIR = PROJECT_ROOT / "conf"
SWEEPS_DIR = PROJECT_ROOT / "sweeps"
SLURM_DIR = PROJECT_ROOT / "slurm"
