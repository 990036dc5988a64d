"""A renter's command, environment variables and ports: the limits every entry point applies
(the API's body, the service, the CLI before it sends). Each check returns the value as stored
and raises InvalidInput whose message starts with the field's name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from cardhour.core.errors import InvalidInput

MAX_COMMAND = 4096  # characters
MAX_ENV = 64  # variables
MAX_ENV_NAME = 255  # characters
MAX_ENV_VALUE = 4096  # characters
MAX_PORTS = 16
SSH_PORT = 22  # the instance's sshd has it
RESERVED_PREFIX = "CARDHOUR_"  # the platform's own variables
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_command(command: str | None) -> str | None:
    """Run by `sh -c` in the container; None (or blank): none, the container idles."""
    if command is None or not command.strip():
        return None
    if len(command) > MAX_COMMAND:
        raise InvalidInput(f"command: {len(command)} characters, at most {MAX_COMMAND}")
    if "\0" in command:
        raise InvalidInput("command: contains a NUL character")
    return command


def check_env(env: Mapping[str, str]) -> dict[str, str]:
    """Names `[A-Za-z_][A-Za-z0-9_]*`, none starting `CARDHOUR_`; at most 64; values at most
    4096 characters, no NUL and no line break (an engine's env file and sshd's environment
    file hold one variable per line). The order given is kept (the container sees them in it)."""
    if len(env) > MAX_ENV:
        raise InvalidInput(f"env: {len(env)} variables, at most {MAX_ENV}")
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name) or len(name) > MAX_ENV_NAME:
            raise InvalidInput(
                f"env: {name!r} is not a variable name (letters, digits and '_', not starting "
                f"with a digit, at most {MAX_ENV_NAME} characters)"
            )
        if name.startswith(RESERVED_PREFIX):
            raise InvalidInput(f"env: {name} is reserved (names starting {RESERVED_PREFIX} are)")
        if not isinstance(value, str):
            raise InvalidInput(f"env: the value of {name} is not a string")
        if len(value) > MAX_ENV_VALUE:
            raise InvalidInput(
                f"env: the value of {name} has {len(value)} characters, at most {MAX_ENV_VALUE}"
            )
        if "\0" in value:
            raise InvalidInput(f"env: the value of {name} contains a NUL character")
        if "\n" in value or "\r" in value:
            raise InvalidInput(
                f"env: the value of {name} contains a line break (one line each; encode a "
                "multi-line value, e.g. base64)"
            )
    return dict(env)


def check_ports(ports: Iterable[int]) -> list[int]:
    """Container ports to publish: 1-65535, distinct, at most 16, never 22 (sshd's)."""
    found = list(ports)
    if len(found) > MAX_PORTS:
        raise InvalidInput(f"ports: {len(found)} ports, at most {MAX_PORTS}")
    seen: set[int] = set()
    for port in found:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise InvalidInput(f"ports: {port!r} is not a port (1-65535)")
        if port == SSH_PORT:
            raise InvalidInput(f"ports: {SSH_PORT} is the instance's sshd; publish another port")
        if port in seen:
            raise InvalidInput(f"ports: {port} is listed twice")
        seen.add(port)
    return found
