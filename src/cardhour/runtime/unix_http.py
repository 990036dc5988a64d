"""HTTP over a Unix socket: how an app replica (which has no network) is called, by the
marketplace's launcher on the control plane's machine and by the host agent's proxy; and
where such sockets go."""

from __future__ import annotations

import http.client
import os
import socket
import stat
import tempfile
from pathlib import Path


class UnixHTTPConnection(http.client.HTTPConnection):
    """An `http.client` connection to the Unix socket at `path`."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def runtime_folder() -> Path:
    """Where this user's sockets go: `$XDG_RUNTIME_DIR`, else /run when writable (root), else
    the temporary folder. (A socket's path must stay under 108 bytes: not under a data dir.)"""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"])
    return Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())


def socket_folder(parent: Path, name: str, user: str) -> Path:
    """`parent/name`, made for a container's socket: `parent` this user's only (mode 0700;
    PermissionError when someone else made it: it may sit in /tmp), `name` owned by the
    container's `user` (`uid:gid`; as root) or writable by it (rootless: the container's user
    is a subordinate id of this one)."""
    parent.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise PermissionError(f"{parent} is not a folder of this user: remove it")
    parent.chmod(0o700)
    folder = parent / name
    folder.mkdir(mode=0o700, exist_ok=True)
    uid, gid = (int(part) for part in user.split(":"))
    if os.geteuid() == 0:
        os.chown(folder, uid, gid)
    else:
        folder.chmod(0o777)
    return folder
