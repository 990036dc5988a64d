"""The scheduler's compiled kernels (numba) and their on-disk cache."""
