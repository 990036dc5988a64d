"""The Slurm backend (real Slurm daemons: see backend.py; the gate's probes: probes.py)."""

from cardhour.backends.slurm.backend import SlurmBackend
from cardhour.backends.slurm.probes import ProbedSlurmBackend, SlurmProbes

__all__ = ["ProbedSlurmBackend", "SlurmBackend", "SlurmProbes"]
