"""What the Podman and Docker CLIs are told and what they print, as pure functions: the
process a container runs (`process_argv`), an engine's error as one line fit for a renter
(`last_line`), and their JSON (`ps`, `inspect`) read into `ContainerStatus`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from cardhour.runtime.base import ContainerState, ContainerStatus

_STATES = {
    "created": ContainerState.CREATED,
    "configured": ContainerState.CREATED,
    "initialized": ContainerState.CREATED,
    "running": ContainerState.RUNNING,
    "paused": ContainerState.RUNNING,
    "restarting": ContainerState.RUNNING,
}
_NOT_STARTED = "0001-01-01"  # Go's zero time: never started
_BOILERPLATE = re.compile(r'unable to start container "[0-9a-f]+": |initializing source \S+: ')


#: a CMD that is only one of these (with options) exits at once without a terminal
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash"})


def process_argv(entrypoint: list[str], cmd: list[str], command: str | None) -> list[str]:
    """The container's process: the image's `entrypoint` followed by `sh -c <command>`; with no
    command, by the image's `cmd`, unless that is empty or a bare shell (`bash`, `/bin/sh -l`:
    it would exit at once with no terminal), then by `sleep infinity`: the container idles
    until stopped. So a service image (a notebook, an inference server) runs its service, a
    base image (CMD bash) idles for SSH, and an image's ENTRYPOINT wrapper always runs."""
    if command is not None:
        tail = ["sh", "-c", command]
    elif cmd and not _bare_shell(cmd):
        tail = cmd
    else:
        tail = ["sleep", "infinity"]
    return [*entrypoint, *tail]


def _bare_shell(argv: list[str]) -> bool:
    return argv[0].rsplit("/", 1)[-1] in _SHELLS and all(a.startswith("-") for a in argv[1:])


def build_failure(text: str, limit: int = 600) -> str:
    """Why a build failed, from its output: the step's own last `ERROR:` line (pip's, say)
    when it printed one, then the engine's last line; at most `limit` characters."""
    said = [line.strip() for line in text.splitlines() if line.strip().startswith("ERROR:")]
    engine = last_line(text, limit)
    found = f"{said[-1]} ({engine})" if said else engine
    return found if len(found) <= limit else found[: limit - 1] + "…"


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of an engine's output, without its boilerplate (`Error: `, the
    container id, the image source), at most `limit` characters: fit to show a renter."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else "no output"
    line = line.removeprefix("Error: ").removeprefix("Error response from daemon: ")
    line = _BOILERPLATE.sub("", line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def gone(stderr: str) -> bool:
    text = stderr.lower()
    return "no such container" in text or "no container with name or id" in text


_ISO = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:\.\d+)?\s*(Z|[+-]\d\d:?\d\d)?")


def _seconds(iso: str | None) -> str | None:
    """An engine's start time in UTC to the second, `YYYY-MM-DDTHH:MM:SSZ` (what `ps` and
    `inspect` both give, so the two compare); None when never started or unreadable."""
    found = _ISO.match(iso or "")
    if found is None or (iso or "").startswith(_NOT_STARTED):
        return None
    day, clock, zone = found.groups()
    offset = "+00:00" if zone in (None, "Z") else zone[:3] + ":" + zone[-2:]
    when = datetime.fromisoformat(f"{day}T{clock}{offset}").astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_ps(item: dict[str, Any]) -> ContainerStatus:
    """A `ContainerStatus` from one object of `podman ps --format json` (no `error`)."""
    status = str(item.get("State", "")).lower()
    exited = status not in _STATES
    ports = {  # consecutive ports come as one entry with a `range`
        int(p["container_port"]) + i: int(p["host_port"]) + i
        for p in item.get("Ports") or []
        if p.get("protocol", "tcp") == "tcp" and p.get("host_port")
        for i in range(int(p.get("range") or 1))
    }
    started = int(item.get("StartedAt") or 0)
    return ContainerStatus(
        name=str((item.get("Names") or [""])[0]),
        state=_STATES.get(status, ContainerState.EXITED),
        labels=dict(item.get("Labels") or {}),
        exit_code=int(item.get("ExitCode", 0)) if exited else None,
        ports=ports,
        started_at=_seconds(f"{_utc(started)}Z") if started > 0 else None,
        pid=int(item.get("Pid") or 0) or None if not exited else None,
    )


def _utc(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_inspect(item: dict[str, Any]) -> ContainerStatus:
    """A `ContainerStatus` from one object of `podman/docker container inspect`."""
    state = item.get("State") or {}
    status = str(state.get("Status", "")).lower()
    ports: dict[int, int] = {}
    for key, bindings in ((item.get("NetworkSettings") or {}).get("Ports") or {}).items():
        port, _, proto = key.partition("/")
        for binding in bindings or []:
            if proto in ("tcp", "") and str(binding.get("HostPort") or "").isdigit():
                ports[int(port)] = int(binding["HostPort"])
    started = state.get("StartedAt") or None
    exited = status not in _STATES
    return ContainerStatus(
        name=str(item.get("Name", "")).lstrip("/"),
        state=_STATES.get(status, ContainerState.EXITED),
        labels=dict((item.get("Config") or {}).get("Labels") or {}),
        exit_code=int(state.get("ExitCode", 0)) if exited else None,
        ports=ports,
        started_at=_seconds(started),
        error=str(state.get("Error") or ""),
        pid=int(state.get("Pid") or 0) or None if not exited else None,
    )
