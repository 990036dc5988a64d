"""One replica of a marketplace app: imports the package's entrypoint (`module:function`) and
serves it on 127.0.0.1 or on a Unix socket.

    python -m cardhour.backends.apps.runner --dir PACKAGE --entrypoint app:handle --port 0
    python3 runner.py --dir /app --entrypoint app:handle --socket /run/cardhour/app.sock

`POST /invoke` with a JSON object calls `function(object)` and answers its JSON; `GET /healthz`
answers once the entrypoint is imported. On TCP the chosen port is printed as `port=N` on
stdout; on a socket, `ready` once it listens. An exception in the app is a 500 with
`{"error": ...}` (the gateway does not charge for it).

Standard library only: the container runtime copies this one file into each app's image.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socketserver
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 10 * 1024 * 1024


def load(package: str, entrypoint: str) -> Callable[[dict[str, Any]], Any]:
    sys.path.insert(0, package)
    module, _, name = entrypoint.partition(":")
    handler = getattr(importlib.import_module(module), name)
    if not callable(handler):
        raise TypeError(f"{entrypoint} is not callable")
    return handler


class UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    """HTTP on a Unix socket (a replica with no network: only whoever can reach the socket
    file calls it)."""

    daemon_threads = True


def serve(
    handler: Callable[[dict[str, Any]], Any], port: int, socket_path: str | None = None
) -> ThreadingHTTPServer | UnixHTTPServer:
    """The server for `handler`: on `socket_path` when given, else on 127.0.0.1:`port`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the gateway reuses its connection
        # headers and body go out in two writes: with Nagle on, the second waits for the
        # client's delayed ACK (~40 ms a call)
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # quiet
            return

        def address_string(self) -> str:  # a Unix socket's peer has no host
            peer: Any = self.client_address
            return str(peer[0]) if isinstance(peer, tuple) else "socket"

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body, allow_nan=False).encode()  # NaN is not JSON: the app failed
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(200 if self.path == "/healthz" else 404, {"ok": self.path == "/healthz"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/invoke" or length > MAX_BODY:
                self.close_connection = True  # its body is left unread on the connection
                self._answer(404 if self.path != "/invoke" else 413, {"error": "bad request"})
                return
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(request, dict):
                    raise ValueError("the input must be a JSON object")
            except ValueError as exc:
                self._answer(400, {"error": str(exc)})
                return
            try:
                self._answer(200, handler(request))
            except Exception as exc:  # noqa: BLE001 - the app's failure, reported, not charged
                self._answer(500, {"error": f"{type(exc).__name__}: {exc}"})

    if socket_path is not None:
        if os.path.exists(socket_path):  # a previous run's; nobody listens on it
            os.unlink(socket_path)

        class UnixHandler(Handler):
            disable_nagle_algorithm = False  # no TCP: no Nagle, and no TCP_NODELAY to set

        unix = UnixHTTPServer(socket_path, UnixHandler)
        # connecting needs write permission on the socket; its 0700 folder decides who may
        os.chmod(socket_path, 0o666)
        return unix
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--socket", help="serve on this Unix socket instead of a port")
    args = parser.parse_args()
    server = serve(load(args.dir, args.entrypoint), args.port, args.socket)
    address: Any = server.server_address
    print("ready" if args.socket else f"port={address[1]}", flush=True)
    # nobody reads stdout after the port: the app's prints go to the replica's log (stderr)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    server.serve_forever()


if __name__ == "__main__":
    main()
