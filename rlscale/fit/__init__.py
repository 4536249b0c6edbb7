"""Curve forms, fitting, uncertainty, extrapolation and comparison (App. A.5-A.7). No plotting."""
