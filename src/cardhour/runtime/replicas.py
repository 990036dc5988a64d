"""Marketplace app replicas as containers, in one place for both that run them: the launcher on
the control plane's machine (`backends.apps.container`) and a host's agent (`agent.apps`).

`spec` is a replica's locked-down container: its app image, user 65534 with every capability
dropped, a read-only root, no network, CPU, memory and process limits, and a folder of the host
(`socket_folder`) mounted at `core.replicas.REPLICA_SOCKET_DIR`, where its runner listens on a
Unix socket (`UnixHTTPConnection`; `healthy` asks it `GET /healthz`). `build_state` says whether
an app image is current on an engine (`core.replicas.build_key`).
"""

from __future__ import annotations

import http.client
import os
import socket
import stat
import tempfile
from pathlib import Path

from cardhour.core.replicas import (
    LABEL_BUILD,
    REPLICA_SOCKET_DIR,
    REPLICA_USER,
    build_key,
)
from cardhour.runtime.base import ContainerRuntime, ContainerSpec, Mount, RuntimeFailure


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


def spec(
    name: str,
    image: str,
    labels: dict[str, str],
    env: dict[str, str],
    cpus: float,
    memory_mb: int,
    folder: Path,
    pids_limit: int,
    devices: tuple[str, ...] = (),
) -> ContainerSpec:
    """A replica's container (module docstring); `folder`: its socket's, from `socket_folder`."""
    return ContainerSpec(
        name=name,
        image=image,
        labels=labels,
        env=env,
        devices=devices,
        cpus=cpus,
        memory_mb=memory_mb,
        mounts=(Mount(str(folder), REPLICA_SOCKET_DIR, read_only=False),),
        read_only_root=True,
        network="none",
        user=REPLICA_USER,
        pids_limit=pids_limit,
        unprivileged=True,
    )


def build_state(
    engine: ContainerRuntime, tag: str, base_image: str, digest: str
) -> tuple[str, bool]:
    """The build label image `tag` must carry to be current (`digest`: the control plane's,
    with `base_image`'s labels on this engine), and whether it does. RuntimeFailure when the
    base image is not here."""
    base_labels = engine.image_labels(base_image)
    if base_labels is None:
        raise RuntimeFailure(
            f"the app base image {base_image} is not here (`make images` builds it)"
        )
    key = build_key(digest, base_labels)
    labels = engine.image_labels(tag)
    return key, labels is not None and labels.get(LABEL_BUILD) == key


def healthy(path: str, timeout: float = 5) -> bool:
    """Whether the replica listening on the Unix socket at `path` answers `GET /healthz`."""
    conn = UnixHTTPConnection(path, timeout)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
