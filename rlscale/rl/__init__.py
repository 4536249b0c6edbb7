"""Pure tensor math of the RL objective: advantages, policy losses, aggregation, filters, length
control. No I/O, no globals."""
