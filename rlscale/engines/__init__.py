"""Generation backends (torch, vLLM) and learner backends (torch, DeepSpeed)."""
