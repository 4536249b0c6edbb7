"""``rlscale fit`` (to be written)."""


def fit_command() -> None:
    """Fit the ScaleRL sigmoid to every run under RESULTS_DIR."""
    raise NotImplementedError
