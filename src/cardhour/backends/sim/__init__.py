"""`sim`: an honest simulation of data centres — it says so in every connection it returns."""

from cardhour.backends.sim.backend import SimBackend

__all__ = ["SimBackend"]
