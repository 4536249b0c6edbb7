"""Synthetic inputs with known truth, for tests, benchmarks and demos only (nothing in the product imports
them): ``curves`` (reward curves of known Eq.-1 parameters, evals drawn as a trainer draws them, sweeps with
known verdicts) and ``results_tree`` (a results folder with its fits, for the report); and one meter,
``cpu_memory`` (the peak of torch's CPU allocations during a call)."""
