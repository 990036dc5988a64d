"""The `cardhour` command against a real `cardhour up` subprocess, plus the client's error mapping.

The server runs with a 1 s simulated provisioning time and fast reconcilers; every CLI call is a
subprocess of the installed console script with its own config file, as a user would run it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardhour.client import ApiError, CardhourClient
from cardhour.runtime.podman import PodmanRuntime
from tests.runtime.conftest import CONF, REPO, runtime  # noqa: F401 - Podman, images built

CARDHOUR = Path(sys.executable).parent / "cardhour"
UP_LINE = re.compile(r"cardhour is up at (http://\S+)")


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any CARDHOUR_* setting of the developer's; app
    replicas as processes, as everywhere in the suite (tests/conftest.py) unless `extra` says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARDHOUR_")}
    return {**env, "PYTHONUNBUFFERED": "1", "CARDHOUR_MARKETPLACE__RUNTIME": "process", **extra}


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[str]
    log: Path


def start_server(
    tmp: Path, port: int = 0, env: dict[str, str] | None = None, **settings: str
) -> Server:
    """`cardhour up --port PORT` (0: a free one) with its data in `tmp/data`, plus `CARDHOUR_*`
    `settings` (or exactly the environment `env`); returns once the banner names the URL (at
    most 60 s)."""
    log = tmp / "server.log"
    if env is None:
        env = clean_env(
            CARDHOUR_SIM__PROVISION_SECONDS="1",
            CARDHOUR_RECONCILERS__INTERVAL_SECONDS="0.2",
            **settings,
        )
    with log.open("a") as err:
        proc = subprocess.Popen(
            [str(CARDHOUR), "up", "--port", str(port), "--data-dir", str(tmp / "data")],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + 60
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        if match := UP_LINE.search(line):
            return Server(match.group(1), proc, log)
    stop_server(proc)
    raise AssertionError(f"cardhour up did not come up:\n{log.read_text()}")


def stop_server(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CARDHOUR), *args],
        capture_output=True,
        text=True,
        env=clean_env(CARDHOUR_CONFIG=str(config)),
        timeout=60,
    )


def ok(config: Path, *args: str) -> str:
    r = cli(config, *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess[str], code: str) -> str:
    """Exit 2, one `error: CODE: ...` line on stderr, nothing on stdout; returns the line."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {code}: "), lines[0]
    return lines[0]


def admin_config(server: Server, tmp_path: Path) -> Path:
    """A CLI config logged in as the server's bootstrap admin."""
    config = tmp_path / "admin" / "config.json"
    password = (server.log.parent / "data" / "admin-password").read_text().strip()
    email = "admin@cardhour.local"
    ok(config, "login", "--url", server.url, "--email", email, "--password", password)
    return config


def signed_up(server: Server, tmp_path: Path) -> Path:
    config = tmp_path / "home" / "config.json"
    email = f"u{uuid.uuid4().hex[:8]}@example.com"
    ok(config, "signup", "--url", server.url, "--email", email, "--password", "password123")
    return config


def test_signup_offers_launch_status_balance_down(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    assert config.stat().st_mode & 0o777 == 0o600
    assert json.loads(config.read_text())["url"] == server.url

    offers = json.loads(ok(config, "offers", "--gpu", "H100:8", "--json"))
    assert any(
        o["price_per_card_hour"] == "1.90" and "NVLink" in o["recommendation"]["summary"]
        for o in offers
    ), offers

    launched = ok(config, "launch", "--gpu", "H100:1", "--name", "demo")
    stages = re.findall(r"→ (\w+)", launched)
    assert stages == ["pending", "provisioning", "running"], launched
    assert "ssh -p 22 root@" in launched

    shown = json.loads(ok(config, "status", "demo", "--json"))
    assert shown["status"] == "running"
    assert [e["to_status"] for e in shown["events"]][-1] == "running"
    assert [(s["name"], s["outcome"]) for s in shown["stages"]] == [
        ("allocated", "ok"),
        ("booting", "ok"),
        ("keys_injected", "skipped"),
        ("topology_detected", "ok"),
        ("nccl_gate", "skipped"),  # one GPU: nothing to all-reduce
        ("ready", "ok"),
    ]
    human = ok(config, "status", "demo")
    assert "topology detected" in human and "8 GPUs, NV18" in human
    assert re.fullmatch(r"\d+\.\d{2}", json.loads(ok(config, "balance", "--json"))["available"])

    ok(config, "down", "demo", "--yes")
    deadline = time.monotonic() + 10
    while True:
        listed = json.loads(ok(config, "status", "--all", "--json"))
        demo = next(i for i in listed if i["name"] == "demo")
        if demo["status"] == "terminated" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert demo["status"] == "terminated"
    assert json.loads(ok(config, "status", "--json")) == []


def test_launch_movable_and_admin_defrag(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    launched = json.loads(
        ok(config, "launch", "--gpu", "A800:1", "--movable", "--no-wait", "--json")
    )
    assert launched["movable"] is True
    forbidden = one_line_error(cli(config, "admin", "defrag", "--gpu", "A800:8"), "forbidden")
    assert "admin" in forbidden

    admin = tmp_path / "admin" / "config.json"
    password = (server.log.parent / "data" / "admin-password").read_text().strip()
    email = "admin@cardhour.local"
    ok(admin, "login", "--url", server.url, "--email", email, "--password", password)
    plan = json.loads(ok(admin, "admin", "defrag", "--gpu", "A800:8", "--json"))
    assert (plan["request"], plan["fits_now"], plan["moves"]) == ("A800:8", True, [])
    assert "fits now on bj1-a800-" in ok(admin, "admin", "defrag", "--gpu", "a800:8")
    assert "multiple of 8" in ok(admin, "admin", "defrag", "--gpu", "H100:12")
    one_line_error(cli(admin, "admin", "defrag", "--gpu", "A800:x"), "invalid_input")


def test_launch_beyond_the_trial_credit_is_one_line(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    line = one_line_error(
        cli(config, "launch", "--gpu", "H100:8", "--name", "big"), "insufficient_balance"
    )
    assert "15.20" in line  # 8 × 1.90 per hour, more than the 10.00 trial credit


def test_unknown_gpu_is_one_line(server: Server, tmp_path: Path) -> None:
    config = signed_up(server, tmp_path)
    assert "NOPE" in one_line_error(cli(config, "launch", "--gpu", "NOPE:1"), "invalid_input")


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    line = one_line_error(cli(tmp_path / "c.json", "status", "--url", url), "unreachable")
    assert url in line


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli(tmp_path / "c.json", "launch", "--bogus").returncode == 2
    bad_key = cli(tmp_path / "c.json", "launch", "--gpu", "H100:1", "--ssh-key", "nope")
    one_line_error(bad_key, "invalid_input")
    long_path = cli(tmp_path / "c.json", "launch", "--gpu", "H100:1", "--ssh-key", "k" * 300)
    one_line_error(long_path, "invalid_input")
    non_ascii = cli(tmp_path / "c.json", "--api-key", "ключ", "balance")
    one_line_error(non_ascii, "invalid_api_key")
    bad_dir = cli(tmp_path / "c.json", "up", "--port", "0", "--data-dir", "/proc/cardhour-nope")
    one_line_error(bad_dir, "invalid_input")


def test_up_lists_the_demo_apps_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
    runtime: PodmanRuntime,  # noqa: F811 - the app base image is built
) -> None:
    """On the default runtime (containers), with the wheelhouse `make demo` uses: every demo
    app's requirements are in the app base image or the wheelhouse, so all three are listed."""
    subprocess.run(["make", "-s", "app-wheels"], cwd=REPO, check=True, timeout=600)
    srv = start_server(
        tmp_path,
        CARDHOUR_MARKETPLACE__RUNTIME="container",
        CARDHOUR_MARKETPLACE__CONTAINERS_CONF=str(CONF),
        CARDHOUR_MARKETPLACE__WHEELHOUSE=str(REPO / ".cache" / "wheels"),
    )
    try:
        assert httpx.get(f"{srv.url}/api/v1/health", timeout=10).json()["status"] == "ok"
        listed = httpx.get(f"{srv.url}/api/v1/apps", timeout=10).json()
        assert sorted((a["slug"], a["category"]) for a in listed) == [
            ("image-restore", "image-restoration"),
            ("rag-search", "rag"),
            ("tts", "speech"),
        ]
    finally:
        assert stop_server(srv.proc) == 0
    assert "cardhour stopped" in srv.log.read_text()


# -- the client's error mapping, without a server ---------------------------------------------


def mock_client(handler: Any, api_key: str | None = "k") -> CardhourClient:
    return CardhourClient("http://cardhour.test", api_key, transport=httpx.MockTransport(handler))


def test_client_maps_the_error_body() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer k"
        assert request.url.raw_path == b"/api/v1/instances/a%2Fb"
        body = {"error": {"code": "not_found", "message": "no instance 'a/b'", "details": {}}}
        return httpx.Response(404, json=body)

    with pytest.raises(ApiError) as caught, mock_client(handler) as client:
        client.get_instance("a/b")
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    assert caught.value.message == "no instance 'a/b'"


def test_client_reports_foreign_responses_and_no_connection() -> None:
    with (
        pytest.raises(ApiError) as html,
        mock_client(lambda r: httpx.Response(502, text="<html>")) as c,
    ):
        c.health()
    assert (html.value.status, html.value.code) == (502, "http_error")

    with pytest.raises(ApiError) as odd, mock_client(lambda r: httpx.Response(200, json=[])) as c:
        c.balance()
    assert odd.value.code == "bad_response"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ApiError) as down, mock_client(refuse, api_key=None) as c:
        c.offers(gpu="H100:8")
    assert (down.value.status, down.value.code) == (0, "unreachable")
    assert "http://cardhour.test" in down.value.message


def test_client_create_instance_sends_the_body() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(422, json={"error": {"code": "invalid_input", "message": "m"}})

    with pytest.raises(ApiError), mock_client(handler) as client:
        client.create_instance(gpu="H100", count=2, name="x")
    assert sent[0]["gpu"] == "H100" and sent[0]["count"] == 2 and sent[0]["name"] == "x"
