"""GPU kernels of the decode path (Triton): decode attention over the static KV cache and Gumbel-max sampling."""
