"""The training loop, evaluation, compute accounting, metrics, checkpoints and resume."""
