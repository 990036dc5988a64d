"""Marketplace app replicas on this host: containers of kind `app` (`backends.apps.hosts` says
what the control plane asks for).

- **Image**: the spec names its tag, the control plane's build digest and the base image. The
  image is built here when it is missing or its build label (`core.replicas.build_key`: the
  digest and this host's base image) differs: the build context is fetched from the control
  plane (`fetch`), unpacked, and built with no network. A base image this host lacks fails
  the replica with that reason.
- **Container**: a read-only root, no network, user 65534 with every capability dropped, the
  placed GPUs' devices, CPU, memory and process limits; its runner listens on a Unix socket in
  a folder of this host mounted at `core.replicas.REPLICA_SOCKET_DIR`.
- **Proxy**: the gateway calls a replica on `address:port` (the port picked at creation and
  kept as a container label, so a restarted agent opens the same one). Only requests carrying
  the replica's token (`core.replicas.REPLICA_TOKEN_HEADER`) pass, to the socket; others get
  401. A replica is reported ready (its port, empty probes) once `GET /healthz` answers
  through the socket.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import io
import json
import logging
import shutil
import socket
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cardhour.core.hosts import FAILED
from cardhour.core.replicas import (
    LABEL_BUILD,
    LABEL_VERSION,
    REPLICA_SOCKET,
    REPLICA_TOKEN_HEADER,
    REPLICA_USER,
)
from cardhour.runtime import replicas
from cardhour.runtime.base import ContainerRuntime, ContainerSpec, ContainerStatus, RuntimeFailure
from cardhour.runtime.replicas import UnixHTTPConnection, runtime_folder, socket_folder

log = logging.getLogger("cardhour.agent")
LABEL_APP_PORT = "org.cardhour.app-port"  # where the agent's proxy to the replica listens
CALL_TIMEOUT = 120.0  # a call's longest wait for the replica's answer (the gateway's too)
IDLE_TIMEOUT = 60.0  # a connection to the proxy that sends nothing this long is closed
MAX_BODY = 64 * 1024 * 1024  # a call's body and a replica's answer, each
BUILD_PREFIX = "app-build-"  # an image build's folder in the state dir


@dataclass
class AppReplicas:
    runtime: ContainerRuntime
    address: str
    state_dir: Path
    fetch: Callable[[str], bytes]  # workload -> its packed build context
    proxies: dict[str, ThreadingHTTPServer] = field(default_factory=dict)  # by container
    ready: dict[str, str] = field(default_factory=dict)  # container -> the start that answered

    def __post_init__(self) -> None:
        label = hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:12]
        self.sockets = runtime_folder() / f"cardhour-agent-{label}"

    def container_spec(
        self, name: str, spec: dict[str, Any], labels: dict[str, str], devices: tuple[str, ...]
    ) -> ContainerSpec:
        """The runtime's spec of the replica, its image built first when needed (this step
        waits for it) and its proxy's port picked after that. RuntimeFailure when the image
        cannot be had."""
        self._image(spec)
        self.forget(name)  # a proxy of an earlier container of the name
        try:
            folder = socket_folder(self.sockets, self._folder_name(name), REPLICA_USER)
        except OSError as exc:
            raise RuntimeFailure(f"cannot make the replica's socket folder: {exc}") from exc
        port = free_port(self.address)
        return replicas.spec(
            name,
            str(spec["image"]),
            labels | {LABEL_APP_PORT: str(port), LABEL_VERSION: str(spec["app"])},
            {str(k): str(v) for k, v in (spec.get("env") or {}).items()},
            float(spec["cpus"]),
            int(spec["memory_mb"]),
            folder,
            int(spec.get("pids_limit") or 256),
            devices,
        )

    def report(self, name: str, spec: dict[str, Any], status: ContainerStatus) -> dict[str, Any]:
        """What a running replica's report adds: its proxy's port, and `probes` once it
        answers (none yet: the caller asks again soon); `failed` when its proxy cannot open."""
        port = int(status.labels.get(LABEL_APP_PORT) or 0)
        path = str(self.sockets / self._folder_name(name) / REPLICA_SOCKET)
        try:
            self._proxy(name, port, path, str(spec["token"]))
        except OSError as exc:
            return {"state": FAILED, "error": f"cannot open the replica's proxy: {exc}"}
        added: dict[str, Any] = {"ports": {"app": port}}
        started = str(status.started_at)
        if self.ready.get(name) != started and replicas.healthy(path, 2):
            self.ready[name] = started
        if self.ready.get(name) == started:
            added["probes"] = {}
        return added

    def forget(self, name: str) -> None:
        """The replica's container is gone: close its proxy, remove its socket folder."""
        self.ready.pop(name, None)
        proxy = self.proxies.pop(name, None)
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        shutil.rmtree(self.sockets / self._folder_name(name), ignore_errors=True)

    def tidy(self, names: set[str]) -> None:
        """Drop what belongs to no container of `names` (the ones this host has): proxies and
        socket folders of containers gone behind the agent's back, and the folders of image
        builds an earlier agent was killed in (none runs now: builds run on this thread)."""
        for name in set(self.proxies) - names:
            self.forget(name)
        keep = {self._folder_name(n) for n in names}
        if self.sockets.is_dir():
            for folder in self.sockets.iterdir():
                if folder.name not in keep:
                    shutil.rmtree(folder, ignore_errors=True)
        for folder in self.state_dir.glob(f"{BUILD_PREFIX}*"):
            shutil.rmtree(folder, ignore_errors=True)

    # -- inside ------------------------------------------------------------------------------

    @staticmethod
    def _folder_name(name: str) -> str:
        return hashlib.sha256(name.encode()).hexdigest()[:16]  # a socket path stays short

    def _image(self, spec: dict[str, Any]) -> None:
        tag, base = str(spec["image"]), str(spec["base_image"])
        key, current = replicas.build_state(self.runtime, tag, base, str(spec["build"]))
        if current:
            return
        log.info("building %s for app %s", tag, spec["app"])
        try:
            packed = self.fetch(str(spec["workload"]))
        except Exception as exc:  # noqa: BLE001 - the client's errors, said as the reason
            raise RuntimeFailure(f"cannot fetch the app's build context: {exc}") from exc
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=BUILD_PREFIX, dir=self.state_dir) as folder:
            unpack(packed, Path(folder))
            self.runtime.build(folder, tag, {LABEL_BUILD: key, LABEL_VERSION: str(spec["app"])})

    def _proxy(self, name: str, port: int, socket: str, token: str) -> None:
        """Open the replica's proxy unless open (OSError when its port cannot be had)."""
        if name in self.proxies:
            return
        if not port:
            raise OSError("the container carries no proxy port")
        server = ThreadingHTTPServer((self.address, port), _Forward, bind_and_activate=True)
        server.daemon_threads = True
        server.socket_path = socket  # type: ignore[attr-defined]
        server.token = token.encode()  # type: ignore[attr-defined]
        thread = threading.Thread(target=server.serve_forever, name=f"proxy-{port}", daemon=True)
        thread.start()
        self.proxies[name] = server
        log.info("replica %s answers on %s:%s", name, self.address, port)


class _Forward(BaseHTTPRequestHandler):
    """One request to a replica: its token checked, then sent on to its socket."""

    protocol_version = "HTTP/1.1"  # keep-alive: the gateway reuses its connections
    timeout = IDLE_TIMEOUT  # a silent connection does not hold a thread for ever

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._forward()

    def do_POST(self) -> None:  # noqa: N802
        self._forward()

    def _forward(self) -> None:
        token = self.headers.get(REPLICA_TOKEN_HEADER, "").encode()
        if not hmac.compare_digest(token, self.server.token):  # type: ignore[attr-defined]
            self._answer(401, {"error": "a call to this replica needs its token"}, close=True)
            return
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > MAX_BODY:
            self._answer(413, {"error": f"a body of 0 to {MAX_BODY} bytes"}, close=True)
            return
        body = self.rfile.read(int(length))
        conn = UnixHTTPConnection(self.server.socket_path, CALL_TIMEOUT)  # type: ignore[attr-defined]
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(self.command, self.path, body, headers)
            reply = conn.getresponse()
            data, status = reply.read(MAX_BODY + 1), reply.status
            kind = reply.getheader("Content-Type", "application/json")
        except (OSError, http.client.HTTPException) as exc:
            self._answer(502, {"error": f"the replica did not answer: {exc!r}"})
            return
        finally:
            conn.close()
        if len(data) > MAX_BODY:
            self._answer(502, {"error": f"the replica's answer is over {MAX_BODY} bytes"})
            return
        self._send(status, data, kind)

    def _answer(self, status: int, body: dict[str, str], close: bool = False) -> None:
        if close:
            self.close_connection = True
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # a call per line would drown the agent's log


def unpack(packed: bytes, folder: Path) -> None:
    """Unpack a build context (a gzipped tar) into `folder`: regular files and folders only,
    every path inside it (Debian's Python 3.11.2 has no extraction filter). RuntimeFailure
    otherwise."""
    try:
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as archive:
            members = archive.getmembers()
            for member in members:
                inside = (folder / member.name).resolve().is_relative_to(folder.resolve())
                if not (member.isfile() or member.isdir()) or not inside:
                    raise RuntimeFailure(f"the app's build context holds {member.name!r}")
            archive.extractall(folder, members=members)
    except (tarfile.TarError, OSError) as exc:
        raise RuntimeFailure(f"the app's build context cannot be unpacked: {exc}") from exc


def free_port(address: str) -> int:
    """A TCP port nothing listens on at `address` now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])
