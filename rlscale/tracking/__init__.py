"""Where metrics lines go besides metrics.jsonl: experiment trackers (``logger=``) and the progress
display of ``rlscale run``. Each is a ``MetricsSink``."""
from rlscale.tracking.sinks import MetricsSink, TrackerMissing, open_tracker

__all__ = ["MetricsSink", "TrackerMissing", "open_tracker"]
