"""rlscale: run, fit and report RL-compute scaling experiments on LLMs (the ScaleRL method)."""
__version__ = "0.1.0"
