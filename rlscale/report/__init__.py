"""Plots and the HTML page, from the outputs of ``rlscale fit``. No fitting."""
