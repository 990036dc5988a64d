"""Persistent volumes over the REST API on the simulated fleet (both databases): create, list,
delete, attach at launch, one instance at a time, placement where the volume is, the charge
for the GB-hours kept, and a clear 4xx for every bad input (docs/dev/storage.md)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from sqlalchemy import select

from cardhour.db.engine import transaction
from cardhour.db.models import LedgerTransferRow
from cardhour.services.billing import ledger
from cardhour.services.storage import charges
from tests.conftest import Api

PRICE = Decimal("0.0003")  # the demo fleet's CNY per GB-hour


def _create(api: Api, headers: dict[str, str], **body: object) -> dict:
    r = api.client.post(
        "/api/v1/volumes", headers=headers, json={"size": "10G", "data_centre": "bj1", **body}
    )
    assert r.status_code == 201, r.text
    return r.json()


def _launch(api: Api, headers: dict[str, str], **body: object) -> dict:
    r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", **body})
    assert r.status_code == 201, r.text
    return r.json()


def _converge(api: Api) -> None:
    """Placed, then booted (the simulator takes its time) or released."""
    api.settle()
    api.settle(30)


def _error(r: object, status: int, code: str) -> str:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    error = r.json()["error"]  # type: ignore[attr-defined]
    assert error["code"] == code, error
    return str(error["message"])


def _posted(api: Api, volume_id: str) -> Decimal:
    """What the ledger's `storage` transfers for the volume add up to."""
    with transaction(api.platform.sessions) as s:
        rows = s.scalars(
            select(LedgerTransferRow).where(
                LedgerTransferRow.kind == "storage", LedgerTransferRow.ref == volume_id
            )
        ).all()
        return Decimal(sum(r.amount for r in rows)) / 1_000_000


def _exact(size_gb: int, seconds: int) -> str:
    cost = Decimal(size_gb) * seconds * PRICE / 3600
    return str(cost.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def test_create_list_show_delete_and_the_charge_for_the_time_kept(api: Api) -> None:
    headers = api.signup()
    made = _create(api, headers, name="data", size="100G")
    assert (made["size_gb"], made["state"], made["data_centre"]) == (100, "available", "bj1")
    assert (made["price_per_gb_hour"], made["hourly"]) == ("0.000300", "0.030000")
    assert made["shared"] is False and made["host"] is None
    assert [v["name"] for v in api.client.get("/api/v1/volumes", headers=headers).json()] == [
        "data"
    ]
    assert api.client.get("/api/v1/volumes/data", headers=headers).json()["id"] == made["id"]
    by_id = api.client.get(f"/api/v1/volumes/{made['id']}", headers=headers).json()
    assert by_id["name"] == "data"

    api.settle(3600 + 17)  # an hour and 17 s: charged to the micro-unit, rounded half up
    shown = api.client.get("/api/v1/volumes/data", headers=headers).json()
    assert shown["charged"] == _exact(100, 3617)
    assert _posted(api, made["id"]) == Decimal(_exact(100, 3617))  # from the trial credit

    api.clock.advance(42)
    r = api.client.delete("/api/v1/volumes/data", headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "deleted"  # no host ever made it: gone at once
    api.settle(3600)  # billing ended at the delete: the last 42 s charged, nothing after
    gone = api.client.get("/api/v1/volumes?all=true", headers=headers).json()
    assert [(v["name"], v["state"], v["charged"]) for v in gone] == [
        ("data", "deleted", _exact(100, 3659))
    ]
    assert _posted(api, made["id"]) == Decimal(_exact(100, 3659))
    assert api.client.get("/api/v1/volumes", headers=headers).json() == []
    assert api.client.get("/api/v1/volumes/data", headers=headers).status_code == 404
    _create(api, headers, name="data")  # the name is free again
    with transaction(api.platform.sessions) as s:
        check = ledger.verify(s)
    assert check.balanced, check.problems


@pytest.mark.parametrize(
    ("body", "status", "code", "said"),
    [
        ({"size": "0G"}, 422, "invalid_input", "at least 1 GiB"),
        ({"size": 0}, 422, "invalid_input", "at least 1 GiB"),
        ({"size": "-5G"}, 422, "invalid_input", "bad size"),
        ({"size": -5}, 422, "invalid_input", "bad size"),
        ({"size": "lots"}, 422, "invalid_input", "bad size"),
        ({"size": "1.5G"}, 422, "invalid_input", "bad size"),
        ({"size": "11T"}, 422, "invalid_input", "largest volume (10240 GiB)"),
        ({"size": True}, 422, "invalid_input", ""),
        ({"data_centre": "mars1"}, 422, "invalid_input", "unknown data centre 'mars1'"),
        ({"name": "Data_1"}, 422, "invalid_input", "bad volume name"),
        ({"colour": "red"}, 422, "invalid_input", ""),
    ],
)
def test_bad_input_is_a_clear_4xx(
    api: Api, body: dict[str, object], status: int, code: str, said: str
) -> None:
    headers = api.signup()
    r = api.client.post(
        "/api/v1/volumes",
        headers=headers,
        json={"name": "data", "size": "10G", "data_centre": "bj1", **body},
    )
    assert said in _error(r, status, code)
    assert api.client.get("/api/v1/volumes", headers=headers).json() == []


def test_names_balance_and_other_tenants(api: Api) -> None:
    ada, bob = api.signup(), api.signup()
    mine = _create(api, ada, name="data")
    assert "already have a volume" in _error(
        api.client.post(
            "/api/v1/volumes", headers=ada, json={"name": "data", "size": 1, "data_centre": "wh1"}
        ),
        409,
        "conflict",
    )
    # 10 TiB for an hour is 3.072 CNY: the 10 CNY trial covers three at once, not a fourth
    big = {"size": "10T", "data_centre": "bj1"}
    for i in range(3):
        _create(api, bob, name=f"big{i}", **big)
    r = api.client.post("/api/v1/volumes", headers=bob, json={"name": "big3", **big})
    assert "does not cover one hour of a 10240 GiB volume" in _error(r, 402, "insufficient_balance")
    for ident in ("data", mine["id"]):  # another tenant's volume is a missing one
        assert api.client.get(f"/api/v1/volumes/{ident}", headers=bob).status_code == 404
        assert api.client.delete(f"/api/v1/volumes/{ident}", headers=bob).status_code == 404
    r = api.client.post(
        "/api/v1/instances", headers=bob, json={"gpu": "H100", "volumes": ["data:/data"]}
    )
    assert "no volume 'data'" in _error(r, 404, "not_found")
    assert api.client.get("/api/v1/volumes/data", headers=ada).json()["state"] == "available"


def test_an_instance_runs_where_its_volume_is_and_holds_it_until_terminated(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    _create(api, headers, name="data", data_centre="wh1")
    a = _launch(api, headers, name="a", volumes=["data:/data"])
    assert a["volumes"] == [{"volume": "data", "path": "/data"}]
    _converge(api)
    shown = api.client.get("/api/v1/instances/a", headers=headers).json()
    assert shown["status"] == "running" and shown["data_centre"] == "wh1"
    assert shown["volumes"] == [{"volume": "data", "path": "/data"}]
    simulated = shown["connection"]["volumes"]  # the simulator says what it does not do
    assert simulated["simulated"] is True and "nothing is stored" in simulated["note"]
    volume = api.client.get("/api/v1/volumes/data", headers=headers).json()
    assert (volume["state"], volume["instance_id"], volume["mount_path"]) == (
        "attached",
        a["id"],
        "/data",
    )
    assert volume["host"] == shown["nodes"][0]

    r = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "volumes": ["data:/work"]}
    )
    assert "attached to another instance" in _error(r, 409, "conflict")
    r = api.client.post(  # the same volume by name and by id
        "/api/v1/instances",
        headers=headers,
        json={"gpu": "H100", "volumes": ["data:/a", f"{volume['id']}:/b"]},
    )
    assert "listed twice" in _error(r, 422, "invalid_input")
    assert "terminate the instance first" in _error(
        api.client.delete("/api/v1/volumes/data", headers=headers), 409, "conflict"
    )
    # a stop keeps it attached, and the start lands where its data is; a terminate frees it
    assert api.client.post("/api/v1/instances/a/stop", headers=headers).status_code == 200
    _converge(api)
    volume = api.client.get("/api/v1/volumes/data", headers=headers).json()
    assert volume["state"] == "attached"
    assert api.client.post("/api/v1/instances/a/start", headers=headers).status_code == 200
    _converge(api)
    again = api.client.get("/api/v1/instances/a", headers=headers).json()
    assert again["status"] == "running" and again["nodes"] == shown["nodes"]
    assert api.client.post("/api/v1/instances/a/stop", headers=headers).status_code == 200
    _converge(api)
    assert api.client.delete("/api/v1/instances/a", headers=headers).status_code == 200
    _converge(api)
    assert api.client.get("/api/v1/volumes/data", headers=headers).json()["state"] == "available"

    b = _launch(api, headers, name="b", volumes=[{"volume": "data", "path": "/data"}])
    _converge(api)
    assert api.client.get("/api/v1/instances/b", headers=headers).json()["data_centre"] == "wh1"
    assert api.client.delete("/api/v1/instances/b", headers=headers).status_code == 200
    _converge(api)
    r = api.client.delete("/api/v1/volumes/data", headers=headers)
    assert r.json()["state"] == "deleting"  # it held data: its host removes it
    _converge(api)  # the simulator keeps no data: the storage reconciler finishes at once
    gone = api.client.get("/api/v1/volumes?all=true", headers=headers).json()
    assert [(v["state"], v["reason"]) for v in gone] == [
        ("deleted", "deleted; its host removed the data")
    ]
    assert b["id"]


@pytest.mark.parametrize(
    ("volumes", "status", "code", "said"),
    [
        (["data"], 422, "invalid_input", "is not NAME:/path"),
        (["data:data"], 422, "invalid_input", "bad mount path"),
        (["data:/etc"], 422, "invalid_input", "/etc is a system path"),
        (["data:/root/.ssh/keys"], 422, "invalid_input", "system path"),
        (["data:/a/../b"], 422, "invalid_input", "bad mount path"),
        (["data:/data", "data:/other"], 422, "invalid_input", "listed twice"),
        (["data:/data", "far:/data"], 422, "invalid_input", "/data is used twice"),
        (["data:/data", "far:/far"], 422, "invalid_input", "different data centres"),
        ([f"v{i}:/v{i}" for i in range(9)], 422, "invalid_input", "at most 8"),
        (["nope:/data"], 404, "not_found", "no volume 'nope'"),
    ],
)
def test_bad_mounts_are_refused_and_attach_nothing(
    api: Api, volumes: list[str], status: int, code: str, said: str
) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    _create(api, headers, name="data")
    _create(api, headers, name="far", data_centre="wh1")
    r = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "volumes": volumes}
    )
    assert said in _error(r, status, code)
    listed = api.client.get("/api/v1/volumes", headers=headers).json()
    assert {v["state"] for v in listed} == {"available"}
    assert api.client.get("/api/v1/instances", headers=headers).json() == []


def test_a_cluster_cannot_share_a_volume(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "1000")
    _create(api, headers, name="data")
    r = api.client.post(
        "/api/v1/instances",
        headers=headers,
        json={"gpu": "H100", "count": 8, "nodes": 2, "volumes": ["data:/data"]},
    )
    assert "cannot share it" in _error(r, 422, "invalid_input")


def test_statements_have_a_line_per_volume_and_month_that_adds_up_exactly(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "50")
    api.clock.advance(123)  # created at 00:02:03 on 1 January
    made = _create(api, headers, name="data", size="250G")
    january = 31 * 86400 - 123
    api.settle(january - 3600)
    api.settle(3600 + 7 * 86400 + 11)  # across the month boundary, into February
    jan = api.client.get("/api/v1/statements/2026-01", headers=headers).json()
    feb = api.client.get("/api/v1/statements/2026-02", headers=headers).json()
    [line] = jan["storage_lines"]
    assert (line["volume_name"], line["size_gb"], line["gb_seconds"], line["kept"]) == (
        "data", 250, 250 * january, False
    )  # fmt: skip
    assert line["amount"] == _exact(250, january) == jan["storage_total"]
    assert line["rate_per_gb_hour"] == "0.000300"
    [later] = feb["storage_lines"]
    assert later["kept"] is True and later["gb_seconds"] == 250 * (7 * 86400 + 11)
    whole = Decimal(line["amount"]) + Decimal(later["amount"])
    assert whole == Decimal(_exact(250, january + 7 * 86400 + 11))
    api.settle(60)  # charged to now: the lines of both months add up to what the ledger holds
    feb = api.client.get("/api/v1/statements/2026-02", headers=headers).json()
    assert Decimal(line["amount"]) + Decimal(feb["storage_total"]) == _posted(api, made["id"])
    for st in (jan, feb):
        charged = Decimal(st["charged"])
        assert sum(Decimal(v) for v in st["paid_from"].values()) == charged
        assert -Decimal(st["movements"]["storage_charged"]) == charged  # no GPU usage here
        assert Decimal(st["total"]) == Decimal(st["storage_total"])
        opening, closing = Decimal(st["opening"]["total"]), Decimal(st["closing"]["total"])
        assert closing - opening == Decimal(st["movements"]["total"])
    csv = api.client.get("/api/v1/statements/2026-01?format=csv", headers=headers)
    assert csv.status_code == 200, csv.text
    rows = [r.split(",") for r in csv.text.splitlines()]
    header = rows[0]
    storage = [dict(zip(header, r, strict=True)) for r in rows[1:] if r[1] == "storage"]
    assert [(r["volume_name"], r["gb_seconds"], r["amount"]) for r in storage] == [
        ("data", str(250 * january), line["amount"])
    ]


def _events(api: Api, headers: dict[str, str], name: str) -> list[str]:
    return [
        e["kind"]
        for e in api.client.get(f"/api/v1/volumes/{name}", headers=headers).json()["events"]
    ]


def _notices(api: Api, headers: dict[str, str]) -> list[str]:
    rows = api.client.get("/api/v1/notifications", headers=headers).json()
    return [n["subject"] for n in reversed(rows)]


def test_a_volume_whose_owner_runs_out_of_money_is_kept_with_notices_then_deleted(
    api: Api,
) -> None:
    headers = api.signup()  # 10.00 CNY of trial credit
    _create(api, headers, name="big", size="10T")  # 3.072 CNY an hour: gone in 3 h 16 min
    _create(api, headers, name="small", size="1G")
    api.settle(3 * 3600)
    assert api.client.get("/api/v1/volumes/big", headers=headers).json()["overdue_since"] is None
    api.settle(20 * 60)
    api.settle(60)  # the retention pass runs on the charge cadence
    big = api.client.get("/api/v1/volumes/big", headers=headers).json()
    assert big["overdue_since"] is not None and big["state"] == "available"
    assert _events(api, headers, "big") == ["created", "overdue"]
    assert _notices(api, headers)[-1].startswith(
        "Top up to keep your volumes: deleted on 2026-01-16"
    )
    # still kept, still charged: cash goes below zero (the storage was kept)
    api.settle(13 * 86400)
    api.settle(60)
    assert api.client.get("/api/v1/volumes/big", headers=headers).json()["state"] == "available"
    api.settle(86400)  # a day before the end: the last notice
    api.settle(60)
    assert _events(api, headers, "small")[-1] == "warned"
    assert set(_notices(api, headers)[-2:]) == {
        "Volume big is deleted in a day",
        "Volume small is deleted in a day",
    }
    api.settle(86400)
    api.settle(60)
    gone = api.client.get("/api/v1/volumes?all=true", headers=headers).json()
    assert [(v["name"], v["state"]) for v in gone] == [("big", "deleted"), ("small", "deleted")]
    assert all(v["reason"].startswith("deleted after 15 days without money") for v in gone)
    assert set(_notices(api, headers)[-2:]) == {
        "Volume big was deleted",
        "Volume small was deleted",
    }
    charged = {v["name"]: Decimal(v["charged"]) for v in gone}
    assert charged["big"] > Decimal("10.00")  # every hour it was kept
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_a_top_up_keeps_overdue_volumes(api: Api) -> None:
    headers = api.signup()
    _create(api, headers, name="big", size="10T")
    api.settle(3 * 3600 + 20 * 60)
    api.settle(60)
    assert api.client.get("/api/v1/volumes/big", headers=headers).json()["overdue_since"]
    api.top_up(headers, "100")
    api.settle(60)
    big = api.client.get("/api/v1/volumes/big", headers=headers).json()
    assert big["overdue_since"] is None
    assert [e["kind"] for e in big["events"]] == ["created", "overdue", "kept"]
    assert _notices(api, headers)[-1] == "Your volumes are kept: big"
    api.settle(20 * 86400)
    assert api.client.get("/api/v1/volumes/big", headers=headers).json()["state"] == "available"


def test_a_launch_can_name_its_data_centre_and_its_volumes_must_be_there(api: Api) -> None:
    headers = api.signup()
    api.top_up(headers, "100")
    _create(api, headers, name="data", data_centre="bj1")
    placed = _launch(api, headers, name="there", data_centre="wh1")
    _converge(api)
    shown = api.client.get(f"/api/v1/instances/{placed['id']}", headers=headers).json()
    assert shown["status"] == "running" and shown["data_centre"] == "wh1"
    for body, status, code, said in (
        ({"data_centre": "wh1", "volumes": ["data:/data"]}, 422, "invalid_input",
         "volume data is in bj1, not in wh1"),
        ({"data_centre": "mars1"}, 422, "invalid_input", "unknown data centre 'mars1'"),
        ({"gpu": "RTX4090", "data_centre": "bj1"}, 409, "no_capacity",
         "no 1 × RTX4090 can be placed in bj1"),
    ):  # fmt: skip
        r = api.client.post("/api/v1/instances", headers=headers, json={"gpu": "H100", **body})
        assert said in _error(r, status, code)
    assert api.client.get("/api/v1/volumes/data", headers=headers).json()["state"] == "available"


def test_a_launch_refused_after_attaching_leaves_the_volume_free(api: Api) -> None:
    headers = api.signup()  # 10.00 CNY: not an hour of 8 × H100 (15.20)
    _create(api, headers, name="data")
    r = api.client.post(
        "/api/v1/instances",
        headers=headers,
        json={"gpu": "H100", "count": 8, "volumes": ["data:/data"]},
    )
    _error(r, 402, "insufficient_balance")  # refused after the attach, in the same transaction
    volume = api.client.get("/api/v1/volumes/data", headers=headers).json()
    assert (volume["state"], volume["instance_id"]) == ("available", None)
    assert [e["kind"] for e in volume["events"]] == ["created"]
    _launch(api, headers, volumes=["data:/data"])  # one H100 fits: it attaches now


def test_a_charge_cut_short_is_all_or_nothing_and_done_once_after(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = api.signup()
    made = _create(api, headers, name="data", size="100G")
    real = charges.wallet.draw

    def draw_then_die(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("the control plane died mid-charge")

    monkeypatch.setattr(charges.wallet, "draw", draw_then_die)
    api.clock.advance(3600)
    with pytest.raises(RuntimeError, match="mid-charge"):
        api.platform.reconcile()
    assert _posted(api, made["id"]) == 0  # nothing of the cut-short charge stands
    assert api.client.get("/api/v1/volumes/data", headers=headers).json()["charged"] == "0.000000"
    monkeypatch.setattr(charges.wallet, "draw", real)
    api.settle()
    api.settle()  # once, not again
    assert _posted(api, made["id"]) == Decimal(_exact(100, 3600))
    with transaction(api.platform.sessions) as s:
        assert ledger.verify(s).balanced


def test_credits_tied_to_gpu_models_do_not_pay_for_storage(api: Api) -> None:
    email, password = api.platform.bootstrap_admin()
    login = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    admin = {"Authorization": f"Bearer {login.json()['api_key']}"}
    headers = api.signup()
    me = api.client.get("/api/v1/auth/me", headers=headers).json()["email"]
    grant = {"email": me, "kind": "grant_credit", "amount": "1000", "gpu_models": ["H100"]}
    assert api.client.post("/api/v1/admin/credits", headers=admin, json=grant).status_code == 201
    # the 10.00 trial pays for storage, the 1,000 of H100 credit does not: 3 × 10 TiB fit, not 4
    for i in range(3):
        _create(api, headers, name=f"big{i}", size="10T")
    r = api.client.post(
        "/api/v1/volumes",
        headers=headers,
        json={"name": "big3", "size": "10T", "data_centre": "bj1"},
    )
    _error(r, 402, "insufficient_balance")
    api.settle(3 * 3600 + 20 * 60)  # the trial is spent: overdue, whatever the H100 credit holds
    api.settle(60)
    assert api.client.get("/api/v1/volumes/big0", headers=headers).json()["overdue_since"]
