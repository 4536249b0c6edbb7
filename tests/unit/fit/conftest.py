"""What the tests of the CPU benchmarks share: run one in its --quick mode, as CI does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def quick_bench(tmp_path):
    """Run ``bench/<script> --quick --out FILE`` and return the table it wrote (checked equal to what it printed)."""

    def run(script: str) -> str:
        out = tmp_path / f"{Path(script).stem}.md"
        done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--out", str(out)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        text = out.read_text()
        assert text.strip() == done.stdout.strip()
        return text

    return run
