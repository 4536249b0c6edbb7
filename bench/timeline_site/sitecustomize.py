"""Read at start-up by processes a ``bench/start_timeline.py`` run starts (its folder is on their
PYTHONPATH): PipelineRL's forkserver and generator processes print their start-up steps too."""
import os

if os.environ.get("START_TIMELINE_T0") and os.environ.get("START_TIMELINE_PID") != str(os.getpid()):
    import start_timeline

    start_timeline.install()
