"""What a cluster node's container is told of its peers: the command that lets them in."""

from __future__ import annotations

from typing import Any

from cardhour.core.cluster import HOSTFILE_PATH

HOSTFILE_DIR = HOSTFILE_PATH.rsplit("/", 1)[0]


def peers_argv(spec: dict[str, Any], peers: dict[str, Any]) -> list[str]:
    """The command run in the container that lets the cluster's nodes in: `authorized_keys` =
    the renter's keys plus every node's, an ssh config naming each node by its hostname, and
    the cluster's hostfile (`core.cluster.HOSTFILE_PATH`)."""
    keys = "\n".join([str(spec.get("ssh_keys") or "").strip(), *peers["keys"]]).strip()
    config = "".join(
        f"Host {p['host']}\n  HostName {p['address']}\n  Port {p['port']}\n  User root\n"
        "  IdentityFile /root/.ssh/id_ed25519\n  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        for p in peers["ssh"]
    )
    script = (
        'umask 077 && mkdir -p /root/.ssh && printf "%s\\n" "$1" > /root/.ssh/keys.tmp '
        "&& mv /root/.ssh/keys.tmp /root/.ssh/authorized_keys "
        '&& printf "%s" "$2" > /root/.ssh/config '
        f'&& umask 022 && mkdir -p {HOSTFILE_DIR} && printf "%s" "$3" > {HOSTFILE_PATH}'
    )
    return ["sh", "-c", script, "sh", keys, config, str(spec.get("hostfile") or "")]
