"""How a CPU benchmark names its measurement and writes it: the machine (CPU model, widest vector extension,
OpenBLAS's kernels when set), the commit (marked when the code under test has uncommitted changes), and the
table printed and written in one text."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU's model name and widest vector extension (AVX-512, AVX2), and OpenBLAS's kernels when
    OPENBLAS_CORETYPE sets them."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    return ", ".join([model] + [vector] * bool(vector) + [f"OpenBLAS on its {coretype} kernels"] * bool(coretype))


def commit(under_test: Sequence[str]) -> str:
    """HEAD, marked when the folders ``under_test`` (relative to the repository) have uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--", *under_test], capture_output=True, text=True,
                           cwd=ROOT).stdout
    return (head.strip() or "unknown") + (f" + uncommitted changes in {' or '.join(under_test)}" if dirty.strip()
                                          else "")


def publish(lines: Sequence[str], out: Optional[Path]) -> str:
    """The table's text: printed, and written to ``out`` when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out is not None:
        out.write_text(text)
    return text
