"""The ``--smoke`` mode of the Triton benchmarks: on the CPU through Triton's interpreter, which must be chosen
(``TRITON_INTERPRET=1``) before triton is imported, so a bench imports this module before triton."""
from __future__ import annotations

import os
import sys

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")
