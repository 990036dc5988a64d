"""The walking skeleton end to end through the REST API, on SQLite and PostgreSQL."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from tests.conftest import Api


def test_signup_launch_run_terminate_charges_exactly_n_seconds(api: Api) -> None:
    headers = api.signup()
    c = api.client
    assert c.get("/api/v1/balance", headers=headers).json()["available"] == "10.00"

    r = c.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "count": 1, "name": "e2e"}
    )
    assert r.status_code == 201, r.text
    inst = r.json()
    assert inst["status"] == "pending"

    api.settle()
    assert c.get("/api/v1/instances/e2e", headers=headers).json()["status"] == "provisioning"
    api.settle(30)  # the simulated provisioning time
    running = c.get("/api/v1/instances/e2e", headers=headers).json()
    assert running["status"] == "running"
    assert running["connection"]["simulated"] is True

    n = 1234
    api.clock.advance(n / 2)
    api.settle()  # an intermediate metering pass must not change the total
    api.settle(n / 2)
    assert c.delete(f"/api/v1/instances/{inst['id']}", headers=headers).status_code == 200
    api.settle()
    done = c.get(f"/api/v1/instances/{inst['id']}", headers=headers).json()
    assert done["status"] == "terminated"

    expected = (Decimal(n) * Decimal("1.90") / 3600).quantize(Decimal("0.000001"), ROUND_HALF_UP)
    assert Decimal(done["cost_so_far"]) == expected
    balance = c.get("/api/v1/balance", headers=headers).json()
    assert Decimal(balance["available_exact"]) == Decimal("10") - expected
    statuses = [e["to_status"] for e in done["events"]]
    assert statuses == ["pending", "provisioning", "running", "stopping", "terminated"]


def test_other_tenants_instance_is_404(api: Api) -> None:
    alice, bob = api.signup(), api.signup()
    inst = api.client.post("/api/v1/instances", headers=alice, json={"gpu": "A800", "count": 1})
    ident = inst.json()["id"]
    for method, path in [("GET", ""), ("POST", "/stop"), ("POST", "/start"), ("DELETE", "")]:
        r = api.client.request(method, f"/api/v1/instances/{ident}{path}", headers=bob)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "not_found"
    assert api.client.get("/api/v1/instances", headers=bob).json() == []
    assert api.client.get(f"/api/v1/instances/{ident}", headers=alice).status_code == 200
