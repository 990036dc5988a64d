"""`cardhour launch --image REF --command … --env K=V --port N` against a real server whose
fleet allows a registry: the flags round trip into `status --json`; bad input is exit 2 with
one line; the ssh config follows the instance's `ssh` endpoint."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from cardhour.api.schemas import ClusterNodeRead, ClusterRead, InstanceRead, SshRead
from cardhour.cli.compute import ssh as ssh_config
from tests.cli.test_cli import Server, cli, ok, one_line_error, start_server, stop_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`cardhour up` on the demo fleet, allowing images from docker.io/library."""
    tmp = tmp_path_factory.mktemp("up-workload")
    fleet = yaml.safe_load(
        (Path(__file__).parents[2] / "src/cardhour/config/demo-fleet.yaml").read_text()
    )
    fleet["registries"] = ["docker.io/library"]
    (tmp / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    srv = start_server(tmp, CARDHOUR_FLEET_FILE=str(tmp / "fleet.yaml"))
    try:
        yield srv
    finally:
        stop_server(srv.proc)


def _signed_up(server: Server, tmp_path: Path, email: str) -> Path:
    config = tmp_path / "config.json"
    ok(config, "signup", "--url", server.url, "--email", email, "--password", "pw123456")
    return config


def test_launch_flags_round_trip(server: Server, tmp_path: Path) -> None:
    config = _signed_up(server, tmp_path, "web@example.com")
    launched = ok(
        config,
        "launch",
        "--gpu",
        "RTX4090:1",
        "--name",
        "web",
        "--image",
        "python:3.12-slim",
        "--command",
        "python -m http.server 8888",
        "--env",
        "GREETING=hello=world",
        "--env",
        "EMPTY=",
        "--port",
        "8888",
        "--port",
        "6006",
    )
    assert "web is running" in launched
    shown = json.loads(ok(config, "status", "web", "--json"))
    assert shown["image"] == "docker.io/library/python:3.12-slim"
    assert shown["command"] == "python -m http.server 8888"
    assert shown["env"] == {"GREETING": "hello=world", "EMPTY": ""}
    assert shown["ports"] == [8888, 6006]
    assert shown["ssh"] == {"host": shown["connection"]["host"], "port": 22, "user": "root"}
    human = ok(config, "status", "web")
    assert "GREETING, EMPTY" in human and "hello=world" not in human  # names only on screen
    assert "8888, 6006" in human and "python -m http.server 8888" in human
    written = (Path(os.environ["HOME"]) / ".cardhour" / "ssh" / "web").read_text()
    assert f"HostName {shown['ssh']['host']}" in written and "Port 22" in written
    ok(config, "down", "web", "--yes")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--env", "NOVALUE"], "--env 'NOVALUE': expected NAME=VALUE"),
        (["--env", "A=1", "--env", "A=2"], "--env A is given twice"),
        (["--env", "1A=x"], "env: '1A' is not a variable name"),
        (["--env", "CARDHOUR_X=1"], "env: CARDHOUR_X is reserved"),
        (["--port", "22"], "ports: 22 is the instance's sshd"),
        (["--port", "http"], "--port 'http' is not a port number"),
        (["--port", "70000"], "ports: 70000 is not a port"),
    ],
)
def test_bad_workload_flags_are_one_line_and_exit_2(
    server: Server, tmp_path: Path, flags: list[str], message: str
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": server.url}))
    line = one_line_error(cli(config, "launch", "--gpu", "RTX4090:1", *flags), "invalid_input")
    assert message in line


def test_an_image_from_a_registry_not_allowed_is_refused_by_the_server(
    server: Server, tmp_path: Path
) -> None:
    config = _signed_up(server, tmp_path, "refused@example.com")
    r = cli(config, "launch", "--gpu", "RTX4090:1", "--image", "quay.io/org/x:1")
    line = one_line_error(r, "invalid_input")
    assert (
        "quay.io/org/x is not from an allowed registry (allowed registries: docker.io/library)"
        in line
    )
    assert json.loads(ok(config, "status", "--all", "--json")) == []


def _instance(**fields: object) -> InstanceRead:
    now = datetime.now(UTC)
    base: dict[str, object] = {
        "id": "i1",
        "name": "box",
        "status": "running",
        "status_reason": None,
        "gpu": "H100",
        "count": 8,
        "image": "pytorch-2.3-cuda12.3",
        "plan": "on_demand",
        "movable": False,
        "data_centre": "bj1",
        "nodes": ["n1", "n2"],
        "currency": "CNY",
        "price_per_card_hour": "1.90",
        "cost_so_far": "0.000000",
        "connection": {"host": "10.0.0.1", "port": 22, "user": "root"},
        "created_at": now,
        "updated_at": now,
        "cluster": ClusterRead(
            nodes=[
                ClusterNodeRead(rank=r, role=role, hostname=h, node=n, address=a, gpus=8, env={})
                for r, (role, h, n, a) in enumerate(
                    [("head", "box", "n1", "10.0.0.1"), ("worker", "box-worker1", "n2", "10.0.0.2")]
                )
            ],
            hostfile="",
        ),
    }
    return InstanceRead.model_validate({**base, **fields})


def test_the_ssh_config_uses_the_instances_ssh_endpoint() -> None:
    """A backend that publishes the container's sshd on a host port (`ssh`) is reached there;
    workers at their cluster addresses, on their own port where the backend gives one."""
    inst = _instance(ssh=SshRead(host="gpu-07.example.net", port=30412, user="renter"))
    text = ssh_config.host_entries(inst)
    assert "Host box\n  HostName gpu-07.example.net\n  User renter\n  Port 30412\n" in text
    assert "Host box-worker1\n  HostName 10.0.0.2\n  User renter\n  Port 30412\n" in text
    own = _instance(
        ssh=SshRead(host="gpu-07.example.net", port=30412, user="renter"),
        connection={"host": "gpu-07.example.net", "port": 30412, "ports": {"n2": 30999}},
    )
    assert "Host box-worker1\n  HostName 10.0.0.2\n  User renter\n  Port 30999\n" in (
        ssh_config.host_entries(own)
    )
    alone = _instance(cluster=None, ssh=SshRead(host="gpu-07.example.net", port=30412, user="r"))
    assert "Host box\n  HostName gpu-07.example.net\n  User r\n  Port 30412\n" in (
        ssh_config.host_entries(alone)
    )
    assert ssh_config.host_entries(_instance(cluster=None, ssh=None)) == ""
