"""Instance lifecycle through the API: balance gate, offers, failures, stop/start, autostop."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from cardhour.backends.sim import SimBackend
from cardhour.db.engine import transaction
from cardhour.services.compute import provisioning
from tests.conftest import Api


def _launch(api: Api, headers: dict[str, str], **body: object) -> dict:
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", **body})
    assert r.status_code == 201, r.text
    return r.json()


def _get(api: Api, headers: dict[str, str], ident: str) -> dict:
    return api.client.get(f"/api/v1/instances/{ident}", headers=headers).json()


def test_launch_refused_when_balance_does_not_cover_an_hour(api: Api) -> None:
    headers = api.signup()
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "count": 8})
    assert r.status_code == 402
    assert r.json()["error"]["code"] == "insufficient_balance"
    assert "15.20" in r.json()["error"]["message"]
    # five single H100s fit in 10.00 CNY (5 × 1.90 = 9.50), a sixth does not
    for i in range(5):
        _launch(api, headers, name=f"one-{i}")
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", "name": "six"})
    assert r.status_code == 402


def test_errors_have_codes_and_never_500(api: Api) -> None:
    headers = api.signup()
    cases = [
        ({"gpu": "B200"}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 0}, 422, "invalid_input"),
        ({"gpu": "H100", "count": "many"}, 422, "invalid_input"),
        ({"gpu": "H100", "name": "Bad Name"}, 422, "invalid_input"),
        ({"gpu": "H100", "image": "nope"}, 422, "invalid_input"),
        (
            {"gpu": "H100", "ssh_key": "-----BEGIN OPENSSH PRIVATE KEY-----"},
            422,
            "private_key_refused",
        ),
        ({"gpu": "H100", "plan": "weekly"}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 4, "nodes": 2}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 8, "nodes": 0}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 8, "nodes": 129}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 8, "nodes": "2"}, 422, "invalid_input"),
        ({"gpu": "H100", "count": 12}, 409, "no_capacity"),
        ({"count": 1}, 422, "invalid_input"),
    ]
    for body, status, code in cases:
        r = api.client.post("/api/v1/instances", headers=headers, json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
    r = api.client.get("/api/v1/instances")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    r = api.client.get("/api/v1/balance", headers={"Authorization": "Bearer ch_nope"})
    assert r.status_code == 401
    r = api.client.post("/api/v1/auth/signup", json={"email": "x", "password": "password123"})
    assert r.status_code == 422
    r = api.client.post("/api/v1/auth/login", json={"email": "x@y.z", "password": "wrong-pass"})
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")


def test_login_issues_a_new_key(api: Api) -> None:
    api.signup("login@example.com")
    r = api.client.post(
        "/api/v1/auth/login", json={"email": "LOGIN@example.com", "password": "password123"}
    )
    assert r.status_code == 200
    me = api.client.get(
        "/api/v1/auth/me", headers={"Authorization": f"Bearer {r.json()['api_key']}"}
    )
    assert me.json()["email"] == "login@example.com"


def test_offers_show_inventory_prices_and_topology(api: Api) -> None:
    offers = api.client.get("/api/v1/offers").json()
    h100 = [o for o in offers if o["gpu"] == "H100"]
    assert {o["data_centre"] for o in h100} == {"bj1", "wh1"}
    assert all(o["price_per_card_hour"] == "1.90" for o in h100)
    assert all(o["monthly_price_per_card_hour"] == "1.235" for o in h100)

    eight = api.client.get("/api/v1/offers", params={"gpu": "H100:8"}).json()
    rec = eight[0]["recommendation"]
    assert rec["available"] and "1 node" in rec["summary"] and "NVLink" in rec["summary"]
    assert eight[0]["quote"]["per_hour"] == "15.20"

    sixteen = api.client.get("/api/v1/offers", params={"gpu": "H100", "count": 16}).json()
    assert "2 whole nodes under one IB leaf" in sixteen[0]["recommendation"]["summary"]
    # the all-reduce busbw a healthy placement reaches (and the readiness gate measures)
    assert rec["expected_busbw_gbps"] == 477.0 and "all-reduce ~477 GB/s" in rec["summary"]
    across = sixteen[0]["recommendation"]
    assert across["expected_busbw_gbps"] == 188.0  # 94% of 8 × 200 Gb/s rails
    assert "all-reduce across them ~188 GB/s" in across["summary"]
    one = api.client.get("/api/v1/offers", params={"gpu": "H100:1"}).json()
    assert one[0]["recommendation"]["expected_busbw_gbps"] is None

    pcie = api.client.get("/api/v1/offers", params={"gpu": "RTX4090:16"}).json()
    assert not pcie[0]["recommendation"]["available"]
    assert "no InfiniBand" in pcie[0]["recommendation"]["reason"]
    r = api.client.get("/api/v1/offers", params={"gpu": "H100:0"})
    assert r.status_code == 422


def test_inventory_is_live(api: Api) -> None:
    headers = api.signup()
    _launch(api, headers, count=2)
    api.settle()
    offers = api.client.get("/api/v1/offers", params={"gpu": "H100"}).json()
    assert sum(o["free_gpus"] for o in offers) == 192 - 2


def test_failed_provisioning_releases_gpus_and_is_not_billed(api: Api) -> None:
    backend = api.platform.backend
    assert isinstance(backend, SimBackend)
    backend.fail_next()
    headers = api.signup()
    api.top_up(headers, "100")
    inst = _launch(api, headers, count=8)
    api.settle()
    failed = _get(api, headers, inst["id"])
    assert failed["status"] == "failed" and "simulated" in failed["status_reason"]
    assert failed["nodes"] == [] and failed["cost_so_far"] == "0.000000"
    assert backend.machines() == []
    assert api.client.delete(f"/api/v1/instances/{inst['id']}", headers=headers).status_code == 200
    assert _get(api, headers, inst["id"])["status"] == "terminated"


def test_stop_start_and_idempotent_terminate(api: Api) -> None:
    headers = api.signup()
    inst = _launch(api, headers, name="cycle")
    api.settle()
    api.settle(30)
    assert _get(api, headers, "cycle")["status"] == "running"
    api.clock.advance(100)
    r = api.client.post("/api/v1/instances/cycle/stop", headers=headers)
    assert r.json()["status"] == "stopping"
    api.settle()
    stopped = _get(api, headers, "cycle")
    assert stopped["status"] == "stopped" and stopped["nodes"] == []
    api.settle(1000)  # a stopped instance costs nothing
    assert _get(api, headers, "cycle")["cost_so_far"] == stopped["cost_so_far"]
    assert api.client.post("/api/v1/instances/cycle/start", headers=headers).json()["status"] == (
        "pending"
    )
    api.settle()
    api.settle(30)
    assert _get(api, headers, "cycle")["status"] == "running"
    api.settle(200)
    for _ in range(2):
        r = api.client.delete(f"/api/v1/instances/{inst['id']}", headers=headers)
        assert r.status_code == 200
        api.settle()
    final = _get(api, headers, inst["id"])
    assert final["status"] == "terminated"
    # two running segments; their exact costs add up and only the total is rounded (half up)
    per_second = Decimal("1.90") / 3600
    expected = (Decimal(100 + 200) * per_second).quantize(Decimal("0.000001"), ROUND_HALF_UP)
    assert Decimal(final["cost_so_far"]) == expected == Decimal("0.158333")
    r = api.client.post(f"/api/v1/instances/{inst['id']}/start", headers=headers)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "invalid_transition")


def test_running_instance_stops_when_the_balance_runs_out(api: Api) -> None:
    headers = api.signup()
    _launch(api, headers, name="burn", count=4)  # 7.60 CNY/h on 10.00 CNY
    api.settle()
    api.settle(30)
    api.settle(3600)
    assert _get(api, headers, "burn")["status"] == "running"
    api.settle(1200)  # 4,800 s in all: 10.13 CNY > 10.00
    stopped = _get(api, headers, "burn")
    assert stopped["status"] == "stopped"
    assert "balance exhausted" in stopped["events"][-2]["reason"]
    balance = api.client.get("/api/v1/balance", headers=headers).json()
    # charged for exactly the seconds it ran, even past the credit
    assert Decimal(balance["available_exact"]) == Decimal("10") - Decimal(stopped["cost_so_far"])


def test_pending_when_the_fleet_is_full_with_a_reason(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "1000")  # the A800 fleet is 8 nodes × 8 GPUs: fill it
    for i in range(8):
        _launch(api, headers, gpu="A800", count=8, name=f"a{i}")
    api.settle()
    ninth = _launch(api, headers, gpu="A800", count=1, name="ninth")
    api.settle()
    pending = _get(api, headers, ninth["id"])
    assert pending["status"] == "pending"
    assert pending["status_reason"] == (
        "pending: 0/44 nodes fit: 36 wrong GPU model, 8 insufficient GPU"
    )


def test_more_gpus_than_are_free_stay_pending_with_the_engines_reason(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "1000")  # A800: 8 nodes × 8 GPUs, 4 nodes per IB leaf
    for i in range(6):
        _launch(api, headers, gpu="A800", count=8, name=f"a{i}")
    api.settle()
    _launch(api, headers, gpu="A800", count=24, name="big")  # 3 whole nodes; 2 are free
    api.settle()
    big = _get(api, headers, "big")
    assert big["status"] == "pending" and big["nodes"] == []
    reason = big["status_reason"]
    assert "0/" in reason and "nodes fit" in reason
    assert reason == (
        "pending: need 3 whole free nodes, 2 free; "
        "0/44 nodes fit: 36 wrong GPU model, 6 node in use"
    )
    listed = api.client.get("/api/v1/instances", headers=headers).json()
    assert [i["status_reason"] for i in listed if i["name"] == "big"] == [reason]


def test_a_stale_lease_cannot_overwrite_a_users_stop(api: Api) -> None:
    headers = api.signup()
    inst = _launch(api, headers)
    api.settle()
    api.clock.advance(30)
    with transaction(api.platform.sessions) as s:
        (claim,) = provisioning.claim(s, api.clock.now(), lease_seconds=60)
    api.client.post(f"/api/v1/instances/{inst['id']}/stop", headers=headers)
    with transaction(api.platform.sessions) as s:
        applied = provisioning.apply_running(s, claim, {"simulated": True}, api.clock.now())
    assert applied is False
    assert _get(api, headers, inst["id"])["status"] == "stopping"


def test_openapi_and_health(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    assert "/api/v1/instances" in spec["paths"] and "/api/v1/offers" in spec["paths"]
    assert api.client.get("/api/v1/health").json()["status"] == "ok"


def test_a_launch_request_carries_the_api_bodys_fields_by_name() -> None:
    """The router builds `LaunchRequest(**body.model_dump())`: a field added to one and not the
    other fails here (and as a TypeError there), never lands in another field's place."""
    from dataclasses import fields

    from cardhour.api.schemas import InstanceCreate
    from cardhour.services.compute.instances import LaunchRequest

    assert {f.name for f in fields(LaunchRequest)} == set(InstanceCreate.model_fields)
    body = InstanceCreate(gpu="H100", count=8, nodes=2, name="n", weights="w", bare_metal=True)
    req = LaunchRequest(**body.model_dump())
    assert (req.gpu, req.count, req.nodes, req.name, req.weights, req.bare_metal) == (
        "H100",
        8,
        2,
        "n",
        "w",
        True,
    )


def test_a_launchs_response_is_what_a_read_right_after_returns(api: Api) -> None:
    """POST builds its detail view from what the launch wrote (`views.launched`), not read back:
    it must equal GET of the same instance before the reconcilers touch it, field for field."""
    headers = api.signup()
    api.top_up(headers, "10000")
    bodies = [
        {"gpu": "H100", "name": "one"},
        {"gpu": "A800", "count": 4, "name": "four", "weights": "llama3-8b"},
        {"gpu": "H100", "count": 8, "nodes": 2, "name": "pair"},
        {"gpu": "H100", "count": 8, "bare_metal": True, "plan": "monthly", "name": "bm"},
        {"gpu": "RTX4090", "name": "work", "command": "sleep 9", "env": {"A": "1"}, "ports": [80]},
    ]
    for body in bodies:
        created = api.client.post("/api/v1/instances", headers=headers, json=body)
        assert created.status_code == 201, created.text
        read = api.client.get(f"/api/v1/instances/{created.json()['id']}", headers=headers)
        assert read.status_code == 200
        assert created.json() == read.json(), body
