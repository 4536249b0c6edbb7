"""Refusals: an operation that did not start because it would lose or double results (a folder in use,
a checkpoint missing while metrics exist). The message is one line naming the path at fault; nothing
was written."""


class Refused(RuntimeError):
    """Raised before anything is written; ``str(err)`` is the one line to show."""
