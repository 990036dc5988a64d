"""Pure value objects and rules: money, GPUs, topology, states, errors. No I/O."""
