"""Learners: one optimizer update per batch (torch | DeepSpeed ZeRO)."""
