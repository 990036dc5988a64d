"""How the gateway reaches a replica: its `Address` (a port on 127.0.0.1, the host path of its
Unix socket, or an `Endpoint` on another host), a connection to it, a call's headers."""

from __future__ import annotations

import http.client
import select
import socket
from dataclasses import dataclass, field

from cardhour.core.replicas import REPLICA_TOKEN_HEADER
from cardhour.runtime.replicas import UnixHTTPConnection


@dataclass(frozen=True)
class Endpoint:
    """A replica on another host (`hosts.HostLauncher`): its agent's proxy at `host:port`, which
    lets in only calls carrying `token` (`core.replicas.REPLICA_TOKEN_HEADER`)."""

    host: str
    port: int
    token: str = field(repr=False)


CONNECT_SECONDS = 5.0  # how long a connection to a replica on another host may take

#: where a replica answers: a port on 127.0.0.1, the host path of its Unix socket, or an
#: `Endpoint` on another host
Address = int | str | Endpoint


def dropped(sock: socket.socket) -> bool:
    """Whether an idle connection was closed by its peer (readable while idle: EOF)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class NotConnected(ConnectionError):
    """No connection to a replica could be made (refused, or no answer in time): nothing of the
    call was sent."""


class EndpointConnection(http.client.HTTPConnection):
    """A connection to a replica on another host: connecting gives up after `CONNECT_SECONDS`
    (a host powered off answers nothing), raising NotConnected; then the call's timeout."""

    def connect(self) -> None:
        try:
            self.sock = socket.create_connection((self.host, self.port), CONNECT_SECONDS)
        except OSError as exc:
            raise NotConnected(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self.sock.settimeout(self.timeout)


def connection(address: Address, timeout: float = 120) -> http.client.HTTPConnection:
    """A (not yet connected) connection to a replica at `address`."""
    if isinstance(address, str):
        return UnixHTTPConnection(address, timeout)
    if isinstance(address, Endpoint):
        return EndpointConnection(address.host, address.port, timeout=timeout)
    return http.client.HTTPConnection("127.0.0.1", address, timeout=timeout)


def headers_for(address: Address) -> dict[str, str]:
    """A call's headers: JSON, and the proxy's token for a replica on another host."""
    headers = {"Content-Type": "application/json"}
    if isinstance(address, Endpoint):
        headers[REPLICA_TOKEN_HEADER] = address.token
    return headers
