"""Billing across restarts and the ledger's write rate."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.billing import ledger
from cardhour.settings import Settings, default_fleet_text
from tests.conftest import Api


def _two_dc_fleet(tmp_path: Path) -> Path:
    """One H100 node in bj1 at 1.90 and one in wh1 at 3.80."""
    raw = yaml.safe_load(default_fleet_text())
    for dc in raw["data_centres"]:
        dc["node_groups"] = [
            g | {"count": 1} for g in dc["node_groups"] if g["gpu_model"] == "H100"
        ]
    raw["prices"] = [
        {"gpu_model": "H100", "data_centre": "bj1", "on_demand": "1.90"},
        {"gpu_model": "H100", "data_centre": "wh1", "on_demand": "3.80"},
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_restart_elsewhere_never_re_rates_earlier_usage(
    database_url: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    settings = Settings(
        data_dir=tmp_path / "d",
        database_url=database_url,
        fleet_file=_two_dc_fleet(tmp_path),
        sim={"provision_seconds": 0},
    )
    platform = Platform(settings, clock=clock)
    with TestClient(create_app(platform)) as client:
        api = Api(client, platform, clock)
        alice, bob = api.signup(), api.signup()
        api.top_up(alice, "100")
        api.top_up(bob, "100")
        client.post("/api/v1/instances", headers=alice, json={"gpu": "H100", "name": "a"})
        api.settle()
        assert client.get("/api/v1/instances/a", headers=alice).json()["data_centre"] == "bj1"
        api.settle(3600)
        client.post("/api/v1/instances/a/stop", headers=alice)
        api.settle()
        body = {"gpu": "H100", "count": 8, "name": "b"}
        assert client.post("/api/v1/instances", headers=bob, json=body).status_code == 201
        api.settle()  # bob now holds all of bj1
        client.post("/api/v1/instances/a/start", headers=alice)
        api.settle()
        moved = client.get("/api/v1/instances/a", headers=alice).json()
        assert (moved["data_centre"], moved["price_per_card_hour"]) == ("wh1", "3.80")
        assert moved["cost_so_far"] == "1.900000"  # the first hour stays at 1.90
        api.settle(3600)
        assert client.get("/api/v1/instances/a", headers=alice).json()["cost_so_far"] == "5.700000"
    platform.stop()


def test_usage_is_posted_on_a_cadence_not_every_second(api: Api) -> None:
    headers = api.signup()
    api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "name": "tick"})
    api.settle()
    api.settle(30)
    for _ in range(180):  # three minutes of one-second reconciler ticks
        api.settle(1)
    with transaction(api.platform.sessions) as s:
        transfers = ledger.verify(s).transfers
    assert transfers <= 1 + 4  # the trial grant, then one usage transfer per minute at most
    api.client.delete("/api/v1/instances/tick", headers=headers)
    api.settle()
    final = api.client.get("/api/v1/balance", headers=headers).json()
    assert Decimal(final["available_exact"]) == Decimal("10") - Decimal("0.095000")  # 180 s
