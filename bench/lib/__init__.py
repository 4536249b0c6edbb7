"""What the benchmarks share: model shapes with random weights (``shapes``), workloads with a synthetic
tokenizer and task (``workloads``), timers (``timers``) and the decode-loop measurement against the HBM
bound (``decode``). Scripts under ``bench/`` import it as ``lib`` (their folder is first on the path)."""
