"""Real hosts: containers run by the host agent on each GPU server (`cardhour agent`)."""

from cardhour.backends.hosts.backend import HostDirectory, HostsBackend

__all__ = ["HostDirectory", "HostsBackend"]
