"""Backends by role: ``generators`` (torch, vLLM), ``learners`` (torch, DeepSpeed), ``kernels`` (Triton
decode kernels), ``models`` (policies and tokenizers); ``compile_cost`` times compilation for both."""
