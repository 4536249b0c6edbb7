"""Where metrics lines go besides metrics.jsonl: experiment trackers (``logger=``) and the progress
display of ``rlscale run``. Each is a ``MetricsSink``; a tracker (``Tracker``) also holds the run's config and
each eval's completions table."""
from rlscale.tracking.completions import CompletionRow, completion_rows
from rlscale.tracking.sinks import MetricsSink, Tracker, TrackerMissing, open_tracker

__all__ = ["CompletionRow", "MetricsSink", "Tracker", "TrackerMissing", "completion_rows", "open_tracker"]
