"""Real `sshd`s behind simulated nodes (Debian's openssh-server), so `ssh NAME` works end to end
on the `sim` backend: one daemon per node of a machine, on its own loopback port, with its own
host key and `authorized_keys` (the keys the launch injected) under `<data dir>/sshd/<machine>/`.

Only key logins (`PasswordAuthentication no`, `UsePAM no`), root allowed with a key, as on a
rented GPU node. `StrictModes no`: the files live in the platform's data dir, not a home dir.
sshd needs its privilege separation directory `/run/sshd` (created when missing).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


class SshdError(Exception):
    pass


def available() -> bool:
    return Path(SSHD).exists() and shutil.which("ssh-keygen") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(folder: Path, authorized_keys: str) -> int:
    """One sshd for one node, its files in `folder`; returns its port."""
    if not available():
        raise SshdError("openssh-server is not installed (Debian: apt-get install openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / "host_ed25519"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sim-node", "-f", str(key)],
            check=True,
            capture_output=True,
        )
    (folder / "authorized_keys").write_text(authorized_keys)
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {key}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                f"PidFile {folder / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    done = subprocess.run(
        [SSHD, "-f", str(config), "-E", str(folder / "sshd.log")], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SshdError(f"sshd did not start: {done.stderr.strip() or done.returncode}")
    return port


def stop(folder: Path) -> None:
    """Stop the node's sshd (if it runs) and remove its files."""
    pidfile = folder / "sshd.pid"
    for _ in range(20):  # sshd writes it just after it daemonizes
        if pidfile.exists() or not folder.exists():
            break
        time.sleep(0.05)
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
    shutil.rmtree(folder, ignore_errors=True)


def authorized_keys(folder: Path) -> str:
    path = folder / "authorized_keys"
    return path.read_text() if path.exists() else ""
