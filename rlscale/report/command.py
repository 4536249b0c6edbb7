"""``rlscale report`` (to be written)."""


def report_command() -> None:
    """Write the HTML report."""
    raise NotImplementedError
