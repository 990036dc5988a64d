"""A platform on the `hosts` backend, and an agent's side of the channel spoken by hand (the
real agent, with real containers, is in tests/agent)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.core.readiness import modelled
from cardhour.core.topology import NodeSpec
from cardhour.platform import Platform
from cardhour.settings import Settings, load_catalog
from tests.conftest import Api

HEARTBEAT, LOST_AFTER = 10, 40


def inventory(
    model: str = "H100", count: int = 8, host: str = "h", ib_rails: int = 0
) -> dict[str, Any]:
    """What an agent on `count` GPUs of `model` reports (nvidia-smi's names and topology;
    `ibstat` with `ib_rails` active 400 Gb/s ports)."""
    catalog = load_catalog()
    gpu = catalog.model_by_id(model)
    names = {"H100": "NVIDIA H100 80GB HBM3", "RTX4090": "NVIDIA GeForce RTX 4090"}
    node = NodeSpec(host, "bj1", gpu.id, count, 64, 512, None, None, ib_rails, 400)
    return {
        "gpus": [
            {
                "index": i,
                "uuid": f"GPU-{host}-{i}",
                "name": names.get(model, model),
                "memory_mib": 81559,
                "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0",
            }
            for i in range(count)
        ],
        "topology": modelled.nvidia_smi_topo(node, gpu),
        "ibstat": modelled.ibstat(node) if ib_rails else None,
        "cpus": 64,
        "memory_mb": 512 * 1024,
        "disk_gb": 1000,
    }


@dataclass
class Agent:
    """One host's agent, spoken by hand through the API."""

    client: TestClient
    host: str
    credential: str
    version: int | None = None

    def report(
        self, containers: list[dict[str, Any]] | None = None, **extra: Any
    ) -> dict[str, Any]:
        body = {"host": self.host, "containers": containers or [], **extra}
        r = self.client.post(
            "/api/v1/agent/report",
            json=body,
            headers={"Authorization": f"Bearer {self.credential}"},
        )
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        self.version = answer["version"]
        return answer

    def run_all(self, ssh_port: int = 40022, **ports: int) -> list[dict[str, Any]]:
        """Report every wanted container running (with the keys it was given) and return the
        specs; `ports`: extra published ports by container port (`p8888=41000`)."""
        wanted = self.report()["containers"]
        reports = [
            {
                "workload": spec["workload"],
                "state": "running",
                "ports": {"22": ssh_port, **{k.removeprefix("p"): v for k, v in ports.items()}},
                "probes": {"authorized_keys": spec["ssh_keys"]},
            }
            for spec in wanted
        ]
        self.report(reports)
        return list(wanted)


@dataclass
class HostsApi(Api):
    admin: dict[str, str] | None = None

    def enrol(
        self,
        name: str,
        model: str = "H100",
        count: int = 8,
        address: str = "",
        standin: bool = True,
        ib_leaf: str | None = None,
    ) -> Agent:
        """Enrol `name`, join it and report its inventory (not yet in the node table: settle);
        `standin=False`: it says its GPUs are real (the gate then reads its probes);
        `ib_leaf`: on that InfiniBand leaf, with 8 rails."""
        assert self.admin is not None
        body = {"name": name, "data_centre": "bj1", "ib_leaf": ib_leaf}
        r = self.client.post("/api/v1/admin/hosts", json=body, headers=self.admin)
        assert r.status_code == 201, r.text
        joined = self.client.post("/api/v1/agent/join", json={"token": r.json()["token"]})
        assert joined.status_code == 200, joined.text
        agent = Agent(self.client, name, joined.json()["credential"])
        agent.report(
            inventory=inventory(model, count, name, 8 if ib_leaf else 0),
            address=address or f"10.0.0.{len(name)}",
            runtime="podman",
            standin=standin,
        )
        return agent


@pytest.fixture
def hosts_api(database_url: str, tmp_path: Path) -> Iterator[HostsApi]:
    clock = ManualClock()
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        backend="hosts",
        hosts={"heartbeat_seconds": HEARTBEAT, "lost_after_seconds": LOST_AFTER},
    )
    platform = Platform(settings, clock=clock)
    with TestClient(create_app(platform)) as client:
        api = HostsApi(client, platform, clock)
        email, password = platform.bootstrap_admin()
        login = client.post("/api/v1/auth/login", json={"email": email, "password": password})
        api.admin = {"Authorization": f"Bearer {login.json()['api_key']}"}
        yield api
    platform.stop()
