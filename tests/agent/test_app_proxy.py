"""The agent's side of an app replica, without an engine (`agent.apps`): its proxy lets in only
calls with the replica's token and passes them to the replica's Unix socket; it is reported
ready once the replica answers; bad bodies, big answers and closed proxies; build contexts are
unpacked only when every path stays inside; leftovers are tidied."""

from __future__ import annotations

import io
import json
import shutil
import socket
import socketserver
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardhour.agent import apps
from cardhour.agent.apps import LABEL_APP_PORT, AppReplicas, free_port, unpack
from cardhour.core.hosts import FAILED
from cardhour.runtime.base import ContainerState, ContainerStatus, RuntimeFailure
from cardhour.runtime.podman import PodmanRuntime

TOKEN = "the-replica-token"
NAME = "app-r1.h1"
SPEC: dict[str, Any] = {"token": TOKEN}


class _Replica(BaseHTTPRequestHandler):
    """What the runner answers: /healthz, and /invoke echoing its body (or a huge answer)."""

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, b'{"ok": true}')

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if json.loads(body).get("huge"):
            self._send(200, b"x" * (apps.MAX_BODY + 10))
        else:
            self._send(201, json.dumps({"echo": json.loads(body)}).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def address_string(self) -> str:
        return "replica"


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[AppReplicas]:
    found = AppReplicas(PodmanRuntime(), "127.0.0.1", tmp_path / "state", lambda _w: b"")
    found.sockets = Path(tempfile.mkdtemp(prefix="ch-")) / "s"  # a socket path is short
    yield found
    for name in list(found.proxies):
        found.forget(name)
    shutil.rmtree(found.sockets.parent)


def _serve(replicas: AppReplicas) -> _UnixServer:
    folder = replicas.sockets / replicas._folder_name(NAME)
    folder.mkdir(parents=True)
    server = _UnixServer(str(folder / "app.sock"), _Replica)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _status(port: int, started: str = "t1") -> ContainerStatus:
    labels = {LABEL_APP_PORT: str(port)}
    return ContainerStatus(NAME, ContainerState.RUNNING, labels, started_at=started)


def test_a_replica_is_ready_once_it_answers_and_only_its_token_passes(
    replicas: AppReplicas,
) -> None:
    port = free_port("127.0.0.1")
    assert replicas.report(NAME, SPEC, _status(port)) == {"ports": {"app": port}}  # not yet
    server = _serve(replicas)
    try:
        assert replicas.report(NAME, SPEC, _status(port)) == {"ports": {"app": port}, "probes": {}}
        url = f"http://127.0.0.1:{port}/invoke"
        good = {apps.REPLICA_TOKEN_HEADER: TOKEN}
        answer = httpx.post(url, json={"q": 1}, headers=good)
        assert (answer.status_code, answer.json()) == (201, {"echo": {"q": 1}})
        for headers in ({}, {apps.REPLICA_TOKEN_HEADER: "guess"}):
            refused = httpx.post(url, json={"q": 1}, headers=headers)
            assert refused.status_code == 401
        huge = httpx.post(url, json={"huge": True}, headers=good, timeout=60)
        assert huge.status_code == 502 and "over" in huge.json()["error"]
        for length in ("-5", "abc", str(apps.MAX_BODY + 1)):
            assert _raw_status(port, length) == 413
    finally:
        server.shutdown()
        server.server_close()
    replicas.forget(NAME)  # the container is gone: its proxy closes
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}/invoke", json={}, headers=good)


def test_a_proxy_that_cannot_open_fails_the_replica(replicas: AppReplicas) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        report = replicas.report(NAME, SPEC, _status(taken.getsockname()[1]))
    assert report["state"] == FAILED and "proxy" in report["error"]


def test_tidy_closes_proxies_and_removes_folders_of_gone_containers(
    replicas: AppReplicas,
) -> None:
    port = free_port("127.0.0.1")
    replicas.report(NAME, SPEC, _status(port))
    (replicas.sockets / "stale").mkdir(parents=True)
    (replicas.state_dir / "app-build-x1").mkdir(parents=True)
    replicas.tidy(set())
    assert replicas.proxies == {} and list(replicas.sockets.iterdir()) == []
    assert list(replicas.state_dir.glob("app-build-*")) == []


def _tar(*members: tarfile.TarInfo) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return out.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size = 1
    return member


def test_a_build_context_is_unpacked_only_when_every_path_stays_inside(tmp_path: Path) -> None:
    unpack(_tar(_file("./Containerfile"), _file("./app/app.py")), tmp_path / "good")
    assert (tmp_path / "good" / "app" / "app.py").read_bytes() == b"x"
    link = tarfile.TarInfo("./app/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    for bad in (_file("../escaped"), _file("/etc/cron.d/x"), link):
        with pytest.raises(RuntimeFailure, match="holds"):
            unpack(_tar(_file("./Containerfile"), bad), tmp_path / "bad")
    assert not (tmp_path / "escaped").exists()
    with pytest.raises(RuntimeFailure, match="cannot be unpacked"):
        unpack(b"not a tar", tmp_path / "bad")


def _raw_status(port: int, length: str) -> int:
    """The proxy's status for a request with `Content-Length: length` (httpx will not send
    a bad one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            f"POST /invoke HTTP/1.1\r\nHost: x\r\n{apps.REPLICA_TOKEN_HEADER}: {TOKEN}\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        return int(conn.recv(100).split()[1])
