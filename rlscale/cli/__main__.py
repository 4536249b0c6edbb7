"""``python -m rlscale.cli``: the ``rlscale`` console script."""
from rlscale.cli import app

app()
