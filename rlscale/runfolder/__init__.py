"""The results contract (docs/results-contract.md): what train writes and what fit and report read.

results/<sweep>/<variant>/config.yaml    resolved config
results/<sweep>/<variant>/metrics.jsonl  one JSON object per line, append-only
results/<sweep>/<variant>/status.json    pending|running|done|failed|diverged|preempted, with reason
results/<sweep>/<variant>/checkpoints/   atomic
results/<sweep>/sweep.json               variants, overrides, job ids, base variant
"""
from rlscale.runfolder.atomic import atomic_write_json, atomic_write_text
from rlscale.runfolder.discover import RunDir, find_runs
from rlscale.runfolder.metrics import MetricsLog, read_metrics
from rlscale.runfolder.status import RunState, read_status, write_status

__all__ = ["atomic_write_json", "atomic_write_text", "RunDir", "find_runs", "MetricsLog", "read_metrics",
           "RunState", "read_status", "write_status"]
