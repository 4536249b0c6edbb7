"""``rlscale sweep`` and ``rlscale status`` (to be written)."""


def sweep_command() -> None:
    """Run a sweep."""
    raise NotImplementedError


def status_command() -> None:
    """Show sweep state."""
    raise NotImplementedError
