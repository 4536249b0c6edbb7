"""Policies and tokenizers: the embedded tiny model, HF checkpoints, log-prob passes, thinking resolution."""
