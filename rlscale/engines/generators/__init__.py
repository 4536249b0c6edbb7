"""Generators: sample completions with per-token log-probabilities and policy versions (torch | vLLM)."""
