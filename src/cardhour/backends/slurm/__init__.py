"""The Slurm backend (real Slurm daemons: see backend.py)."""

from cardhour.backends.slurm.backend import SlurmBackend

__all__ = ["SlurmBackend"]
