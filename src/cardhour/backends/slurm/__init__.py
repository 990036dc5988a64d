"""The Slurm backend (real Slurm daemons: see backend.py)."""

from cardhour.backends.slurm.backend import ProbedSlurmBackend, SlurmBackend, SlurmProbes

__all__ = ["ProbedSlurmBackend", "SlurmBackend", "SlurmProbes"]
