"""Storage, the pure part: persistent volumes."""
