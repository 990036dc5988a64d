"""Real hosts on this machine: a live control plane (uvicorn + reconcilers, `hosts` backend) and
`cardhour agent` processes, each a "host" on its own loopback address (127.0.1.N) with stand-in
GPUs, running real Podman containers. Everything a test makes is removed by name afterwards:
the agents, their containers (by host label) and their stand-in CDI specs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cardhour.core.clock import SystemClock
from cardhour.core.hosts import DISK_REPOSITORY
from cardhour.platform import Platform
from cardhour.runtime.base import LABEL_HOST, RuntimeFailure
from cardhour.runtime.cdi import DEFAULT_FOLDER, remove_standin_spec, standin_kind
from cardhour.runtime.podman import PodmanRuntime
from cardhour.settings import Settings, default_fleet_text
from tests.cli.test_cli import Server, clean_env, start_server, stop_server
from tests.console.browser import free_port, live_server
from tests.runtime.conftest import CONF, runtime  # noqa: F401 - the images, built once

HEARTBEAT, LOST_AFTER = 1, 10  # generous: a loaded CI machine delays a heartbeat by seconds
AGENT = [str(Path(sys.executable).with_name("cardhour")), "agent"]


def wait_for(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.2)


@dataclass
class Hosts:
    """The control plane at `url`, and the agents this test started."""

    url: str
    platform: Platform
    tmp: Path
    runtime: PodmanRuntime
    admin: dict[str, str] = field(default_factory=dict)
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:6]}")

    def call(
        self, method: str, path: str, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        return httpx.request(method, f"{self.url}/api/v1{path}", headers=headers, timeout=30, **kw)

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def enrol(self, short: str, ib_leaf: str | None = None) -> str:
        body = {"name": self.name(short), "data_centre": "bj1", "ib_leaf": ib_leaf}
        r = self.call("POST", "/admin/hosts", self.admin, json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def start_agent(
        self, short: str, address: str, gpus: str = "H100:8", token: str | None = None
    ) -> None:
        """Start (or restart: no token needed then) the agent of host `short`."""
        state = self.tmp / f"agent-{short}"
        args = [*AGENT, "--server", self.url, "--state-dir", str(state)]
        args += ["--address", address, "--standin-gpus", gpus]
        if token:
            args += ["--token", token]
        env = {
            **os.environ,
            "CARDHOUR_AGENT__CONTAINERS_CONF": str(CONF),
            "CARDHOUR_AGENT__RUNTIME": "podman",
            "CARDHOUR_AGENT__WEIGHTS_DIR": str(self.tmp / "weights"),
        }
        log = (self.tmp / f"agent-{short}.log").open("ab")
        self.agents[short] = subprocess.Popen(args, env=env, stdout=log, stderr=log)

    def join(
        self, short: str, address: str, gpus: str = "H100:8", ib_leaf: str | None = None
    ) -> None:
        """Enrol host `short`, start its agent, wait until its GPUs are for sale."""
        self.start_agent(short, address, gpus, self.enrol(short, ib_leaf))
        try:
            wait_for(lambda: self.host(short).get("state") == "ready" and self.node(short), 30)
        except AssertionError as exc:
            said = f"{self.host(short)}\n{self.log(short)}"
            raise AssertionError(f"host {short} did not join: {said}") from exc

    def kill(self, short: str, sig: int = signal.SIGKILL) -> None:
        proc = self.agents.pop(short)
        proc.send_signal(sig)
        proc.wait(timeout=20)

    def host(self, short: str) -> dict[str, Any]:
        for h in self.call("GET", "/admin/hosts", self.admin).json():
            if h["name"] == self.name(short):
                return dict(h)
        return {}

    def node(self, short: str) -> dict[str, Any]:
        for n in self.call("GET", "/admin/nodes", self.admin).json():
            if n["id"] == self.name(short) and n["schedulable"]:
                return dict(n)
        return {}

    def containers(self, short: str) -> list[str]:
        """Names of the containers on host `short` (running or not)."""
        return sorted(c.name for c in self.runtime.list({LABEL_HOST: self.name(short)}))

    def log(self, short: str) -> str:
        return (self.tmp / f"agent-{short}.log").read_text()

    def close(self) -> None:
        for short in list(self.agents):
            self.kill(short, signal.SIGTERM)
        for short in {
            p.name.removeprefix("agent-").removesuffix(".log") for p in self.tmp.glob("agent-*.log")
        }:
            for name in self.containers(short):
                self.runtime.remove(name)
            for ref in self.runtime.images(DISK_REPOSITORY, {}):  # the disks its agent kept
                if ref.endswith(f":{self.name(short)}"):
                    # an agent of another test may remove it meanwhile
                    with contextlib.suppress(RuntimeFailure):
                        self.runtime.remove_image(ref)
            remove_standin_spec(DEFAULT_FOLDER, standin_kind(self.name(short)))
        unmount_under(self.tmp)


def unmount_under(folder: Path) -> None:
    """Unmount what the agents mounted under `folder` (their volumes), deepest first: a killed
    agent leaves its mounts."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = Path(line.split()[4])
            if point.is_relative_to(folder):
                points.append(point)
    for point in sorted(points, key=lambda p: len(p.parts), reverse=True):
        subprocess.run(["umount", str(point)], check=False, capture_output=True)


def hosts_settings(tmp: Path, database_url: str, shared: bool = False) -> Settings:
    """The demo fleet file, letting renters run their own images from `localhost/cardhour`
    (where `make images` puts the crash image); with `shared`, bj1's hosts share the storage
    path `<tmp>/shared` (volumes there, and the moves of kept disks)."""
    fleet = yaml.safe_load(default_fleet_text())
    fleet["registries"] = ["localhost/cardhour"]
    if shared:
        fleet["storage"]["shared_paths"] = {"bj1": str(tmp / "shared")}
    (tmp / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    return Settings(
        data_dir=tmp / "data",
        database_url=database_url,
        backend="hosts",
        fleet_file=tmp / "fleet.yaml",
        hosts={"heartbeat_seconds": HEARTBEAT, "lost_after_seconds": LOST_AFTER},
        reconcilers={"interval_seconds": 0.2, "provision_timeout_seconds": 90},
        marketplace={"demo_apps": False},
        trial_credit="100.00",  # a 16-GPU cluster holds 30.40 CNY for its first hour
    )


@pytest.fixture
def hosts(
    database_url: str,
    tmp_path: Path,
    runtime: PodmanRuntime,  # noqa: F811
) -> Iterator[Hosts]:
    with control_plane(database_url, tmp_path, runtime) as found:
        yield found


@pytest.fixture
def shared_hosts(
    database_url: str,
    tmp_path: Path,
    runtime: PodmanRuntime,  # noqa: F811
) -> Iterator[Hosts]:
    """`hosts` whose data centre bj1 declares a shared storage path."""
    with control_plane(database_url, tmp_path, runtime, shared=True) as found:
        yield found


@contextmanager
def control_plane(
    database_url: str,
    tmp_path: Path,
    runtime: PodmanRuntime,  # noqa: F811
    shared: bool = False,
) -> Iterator[Hosts]:
    settings = hosts_settings(tmp_path, database_url, shared)
    platform = Platform(settings, clock=SystemClock())
    email, password = platform.bootstrap_admin()
    with live_server(platform) as url:
        found = Hosts(url, platform, tmp_path, runtime)
        login = found.call("POST", "/auth/login", json={"email": email, "password": password})
        found.admin = {"Authorization": f"Bearer {login.json()['api_key']}"}
        try:
            yield found
        finally:
            found.close()


@dataclass
class HostsProcess:
    """`hosts` whose control plane is a `cardhour up` process (bj1 with a shared storage path),
    so a test can kill it for real (`kill_and_restart`: SIGKILL, then a new one on the same
    port, database and data folder)."""

    hosts: Hosts
    server: Server
    port: int
    env: dict[str, str]

    def kill_and_restart(self) -> None:
        self.server.proc.kill()
        self.server.proc.wait(timeout=20)
        self.server = start_server(self.hosts.tmp, port=self.port, env=self.env)


@pytest.fixture
def hosts_process(
    database_url: str,
    tmp_path: Path,
    runtime: PodmanRuntime,  # noqa: F811
) -> Iterator[HostsProcess]:
    settings = hosts_settings(tmp_path, database_url, shared=True)
    port, password = free_port(), "admin-password-1"
    env = clean_env(
        CARDHOUR_BACKEND="hosts",
        CARDHOUR_DATABASE_URL=database_url,
        CARDHOUR_FLEET_FILE=str(settings.fleet_file),
        CARDHOUR_HOSTS__HEARTBEAT_SECONDS=str(HEARTBEAT),
        CARDHOUR_HOSTS__LOST_AFTER_SECONDS=str(LOST_AFTER),
        CARDHOUR_RECONCILERS__INTERVAL_SECONDS="0.2",
        CARDHOUR_RECONCILERS__PROVISION_TIMEOUT_SECONDS="90",
        CARDHOUR_MARKETPLACE__DEMO_APPS="false",
        CARDHOUR_TRIAL_CREDIT="100.00",
        CARDHOUR_ADMIN_PASSWORD=password,
    )
    found = HostsProcess(
        Hosts(f"http://127.0.0.1:{port}", None, tmp_path, runtime),  # type: ignore[arg-type]
        start_server(tmp_path, port=port, env=env),
        port,
        env,
    )
    try:
        login = {"email": settings.admin_email, "password": password}
        r = found.hosts.call("POST", "/auth/login", json=login)
        assert r.status_code == 200, r.text
        found.hosts.admin = {"Authorization": f"Bearer {r.json()['api_key']}"}
        yield found
    finally:
        found.hosts.close()
        stop_server(found.server.proc)
