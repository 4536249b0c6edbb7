"""Sweep specs, variant expansion, validation, submitit dispatch, sbatch generation, sweep state."""
