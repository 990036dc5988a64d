"""What the Chromium tests share: Debian's chromium (no browser download), its flags, and a live
server (uvicorn in a thread) over a started platform."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from playwright import sync_api

from cardhour.api.app import create_app
from cardhour.platform import Platform

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(platform: Platform) -> Iterator[str]:
    """Start the platform's reconcilers and serve its app; yields the base URL. Stops both."""
    platform.start()
    port = free_port()
    config = uvicorn.Config(create_app(platform), host="127.0.0.1", port=port, log_level="warning")
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not web.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert web.started, "server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        web.should_exit = True
        thread.join(timeout=10)
        platform.stop()


def launch(pw: sync_api.Playwright) -> sync_api.Browser:
    assert Path(CHROMIUM).exists(), "Debian chromium missing: make test installs it"
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
