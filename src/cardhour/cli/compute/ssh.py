"""`cardhour ssh NAME [--worker N] [COMMAND…]`, and the ssh config that makes `ssh NAME` and
`ssh NAME-worker1` work (as SkyPilot does it).

Each running instance gets a file `~/.cardhour/ssh/NAME` with one `Host` entry per node (the
head as `NAME` at the instance's `ssh` host, port and user; workers as `NAME-workerN`), written
when `cardhour launch` sees it running, refreshed by `cardhour status NAME` and
`cardhour ssh NAME`, and removed by `cardhour down`.
`~/.ssh/config` gets one line, `Include /home/you/.cardhour/ssh/*`, at its top (an `Include`
below a `Host` line would only apply to that host); nothing else in it is touched. Paths are
written absolute from `$HOME`: ssh itself expands `~` from the passwd entry, not `$HOME`.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer

from cardhour.api.schemas import InstanceRead
from cardhour.cli.common import KeyOption, UrlOption, connect
from cardhour.core.errors import CardhourError, InvalidInput

_SAFE = re.compile(r"[A-Za-z0-9._-]+")


class NotReachable(CardhourError):
    code = "not_running"


def config_dir() -> Path:
    return Path.home() / ".cardhour" / "ssh"


def include_line() -> str:
    return f"Include {config_dir()}/*"


def _endpoints(inst: InstanceRead) -> list[tuple[str, str, int]]:
    """(alias, address, port) per node, the head first: the head where the instance's `ssh`
    says, workers at their cluster address (and their own port, where the backend gave one)."""
    conn = inst.connection or {}
    nodes = inst.cluster.nodes if inst.cluster is not None else []
    if inst.ssh is None and not (nodes and conn):
        return []
    port = inst.ssh.port if inst.ssh is not None else int(conn.get("port", 22))
    found = conn.get("ports")
    ports: dict[str, Any] = found if isinstance(found, dict) else {}
    endpoints = [(n.hostname, n.address, int(ports.get(n.node, port))) for n in nodes]
    if inst.ssh is not None:
        head = nodes[0].hostname if nodes else inst.name
        endpoints[:1] = [(head, inst.ssh.host, inst.ssh.port)]
    return endpoints


def host_entries(inst: InstanceRead) -> str:
    """The `Host` blocks of a running instance; empty when it has no address yet."""
    conn = inst.connection or {}
    endpoints = _endpoints(inst)
    if not endpoints:
        return ""
    user = inst.ssh.user if inst.ssh is not None else str(conn.get("user", "root"))
    lines = [f"# written by cardhour for instance {inst.name} ({inst.id}); removed by `down`"]
    if conn.get("simulated"):  # the backend says what is real about it (sshd or nothing)
        note = " ".join(str(conn.get("note") or "simulated backend").split())
        lines.append(f"# {note}")
    for alias, address, port in endpoints:
        for value in (alias, address, user):
            if not _SAFE.fullmatch(value):  # never write what could inject ssh options
                raise InvalidInput(f"refusing to write an ssh config entry for {value!r}")
        lines += [
            f"Host {alias}",
            f"  HostName {address}",
            f"  User {user}",
            f"  Port {port}",
            "  StrictHostKeyChecking accept-new",
            # outside the included folder: ssh would read it as config
            f"  UserKnownHostsFile {config_dir().parent / 'known_hosts'}",
        ]
    return "\n".join(lines) + "\n"


def write(inst: InstanceRead) -> Path | None:
    """Write (or refresh) the instance's entries and make sure ~/.ssh/config includes them.
    Returns the file written, or None when the instance is not reachable yet."""
    text = host_entries(inst)
    if not text:
        return None
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / inst.name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)
    _ensure_include()
    return path


def remove(name: str) -> None:
    if _SAFE.fullmatch(name):
        (config_dir() / name).unlink(missing_ok=True)


def _ensure_include() -> None:
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    config = ssh_dir / "config"
    current = config.read_text() if config.exists() else ""
    wanted = include_line()
    if any(line.strip() in (wanted, "Include ~/.cardhour/ssh/*") for line in current.splitlines()):
        return
    header = f"# added by cardhour: its instances' hosts\n{wanted}\n\n"
    tmp = config.with_name("config.cardhour.tmp")
    tmp.write_text(header + current)
    tmp.chmod(0o600 if not config.exists() else config.stat().st_mode & 0o777)
    tmp.replace(config)


def ssh(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The instance (name or id).")],
    command: Annotated[
        list[str] | None, typer.Argument(help="A command to run instead of a shell.")
    ] = None,
    worker: Annotated[
        int | None, typer.Option("--worker", min=1, help="Worker N of a cluster (default: head).")
    ] = None,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """Open a shell (or run COMMAND) on the instance over ssh, as `ssh NAME` or
    `ssh NAME-workerN` would once the config is written."""
    with connect(ctx, url, api_key) as client:
        inst = client.get_instance(name)
    if write(inst) is None:
        raise NotReachable(f"{inst.name} is {inst.status}: nothing to connect to yet")
    hosts = [alias for alias, _, _ in _endpoints(inst)]
    if worker is not None and worker >= len(hosts):
        raise InvalidInput(f"{inst.name} has {len(hosts) - 1} worker(s); no worker {worker}")
    host = hosts[worker or 0]
    binary = shutil.which("ssh")
    if binary is None:
        raise InvalidInput("no ssh client on this machine (Debian: apt-get install openssh-client)")
    os.execv(binary, ["ssh", host, *(command or [])])
