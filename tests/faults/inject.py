"""``python tests/faults/inject.py FAULT ARGS...``: ``rlscale ARGS...`` with a signal sent to itself at one
chosen point, so a test stops a real process at a write of its choice, reproducibly.

FAULT is JSON: ``{"at": "write" | "submit", "call": K, "phase": "before" | "middle" | "after", "signal": NAME}``,
optionally ``"count": PATH``. The points are the K-th (from 1) write of the process, counting every line
appended to a run's logs (``MetricsLog.append``: metrics.jsonl, samples.jsonl) and every atomic write's rename
(``os.replace``: status.json, checkpoints/last.pt, config.yaml, sweep.json), or the K-th submission of a
sweep's runs (``rlscale.sweep.orchestrator.submit``). ``before``: ahead of it; ``after``: once it returned;
``middle``: a line appended half (a torn line, on disk) or a temporary file written whole but not renamed.
``count``: the file that receives the number of points the process passed, when it ends (K = 0: no signal).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import sys


def main() -> None:
    fault = json.loads(sys.argv[1])
    sys.argv = ["rlscale", *sys.argv[2:]]
    passed = [0]
    if fault.get("count"):
        atexit.register(lambda: open(fault["count"], "w").write(str(passed[0])))

    def point(phase: str) -> None:
        if passed[0] == fault["call"] and phase == fault["phase"]:
            if fault.get("count"):
                open(fault["count"], "w").write(str(passed[0]))
            os.kill(os.getpid(), getattr(signal, fault["signal"]))

    def wrap(real, middle=None):
        def at_point(*args, **kwargs):
            passed[0] += 1
            point("before")
            if middle is not None and passed[0] == fault["call"] and fault["phase"] == "middle":
                middle(*args, **kwargs)
                point("middle")
            result = real(*args, **kwargs)
            point("after")
            return result
        return at_point

    if fault["at"] == "write":
        from rlscale.runfolder.metrics import MetricsLog

        def half_line(self, record):
            line = json.dumps(record, sort_keys=True, allow_nan=True) + "\n"
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line[:len(line) // 2])

        def temporary_only(src, dst, *args, **kwargs):  # the temporary file is whole: the kill comes first
            pass

        MetricsLog.append = wrap(MetricsLog.append, half_line)
        os.replace = wrap(os.replace, temporary_only)
    else:
        from rlscale.sweep import orchestrator

        orchestrator.submit = wrap(orchestrator.submit)
    from rlscale.cli import app

    app()


if __name__ == "__main__":
    main()
