"""GET /api/v1/statements/{month}: JSON and CSV agree, errors are 422, tenants never mix, and the
SDK reads both."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from cardhour.api.schemas.statements import StatementRead
from cardhour.client import ApiError, CardhourClient
from tests.conftest import Api


def _run(api: Api, headers: dict[str, str], name: str, seconds: int, **body: object) -> str:
    r = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "name": name, **body}
    )
    assert r.status_code == 201, r.text
    api.settle()
    api.settle(30)
    api.settle(seconds)
    return str(r.json()["id"])


def _sum(rows: list[dict[str, str]], kind: str, description: str | None = None) -> Decimal:
    return sum(
        (
            Decimal(r["amount"])
            for r in rows
            if r["type"] == kind and (description is None or r["description"] == description)
        ),
        Decimal(0),
    )


def test_json_and_csv_of_a_month_across_the_boundary(api: Api) -> None:
    alice = api.signup()
    api.top_up(alice, "100")
    api.clock.advance(days=30, hours=23, minutes=29, seconds=30)
    api.settle()
    x = _run(api, alice, "x", 1200)  # running from 23:30; 20 minutes posted in January
    api.settle(1200)  # Feb 1 00:10
    api.client.post("/api/v1/instances/x/stop", headers=alice)
    api.settle()

    jan = api.client.get("/api/v1/statements/2026-01", headers=alice)
    assert jan.status_code == 200 and jan.headers["content-type"].startswith("application/json")
    body = StatementRead.model_validate(jan.json())
    [line] = body.usage_lines
    assert (line.instance_id, line.card_seconds, line.amount) == (x, 1800, "0.950000")
    assert (line.rate_per_card_hour, line.running, body.complete) == ("1.900000", False, True)
    assert body.usage_total == body.total == "0.950000"
    assert body.charged == body.cash_used == "0.633333"  # posted in January; the rest in February
    feb = StatementRead.model_validate(
        api.client.get("/api/v1/statements/2026-02", headers=alice).json()
    )
    assert [u.card_seconds for u in feb.usage_lines] == [600]
    assert feb.opening == body.closing and not feb.complete
    assert Decimal(feb.closing.total) == Decimal("100") - Decimal("0.95") - Decimal(feb.total)
    for st in (body, feb):
        assert Decimal(st.credits_used) + Decimal(st.cash_used) == Decimal(st.charged)
        assert Decimal(st.opening.total) + Decimal(st.movements.total) == Decimal(st.closing.total)

    by_query = api.client.get("/api/v1/statements/2026-01?format=csv", headers=alice)
    by_accept = api.client.get(
        "/api/v1/statements/2026-01", headers={**alice, "Accept": "text/csv"}
    )
    for r in (by_query, by_accept):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        assert r.headers["content-disposition"] == (
            'attachment; filename="cardhour-statement-2026-01.csv"'
        )
    assert by_query.text == by_accept.text
    rows = list(csv.DictReader(io.StringIO(by_query.text)))
    assert [r["instance_id"] for r in rows if r["type"] == "usage"] == [x]
    assert _sum(rows, "usage") == Decimal(body.usage_total)
    assert _sum(rows, "total") == Decimal(body.total)
    assert _sum(rows, "paid_from") == Decimal(body.charged) == Decimal(body.cash_used)
    assert _sum(rows, "movement") == Decimal(body.movements.total)
    assert _sum(rows, "closing_balance", "total") == Decimal(body.closing.total)


def test_a_monthly_plan_is_a_plan_line(api: Api) -> None:
    alice = api.signup()
    api.top_up(alice, "1000")
    plan = _run(api, alice, "p", 60, plan="monthly")
    body = api.client.get("/api/v1/statements/2026-01", headers=alice).json()
    assert body["usage_lines"] == []
    [line] = body["plan_lines"]
    assert (line["instance_id"], line["kind"], line["amount"]) == (plan, "plan", "889.200000")
    assert body["plan_total"] == body["total"] == body["charged"] == "889.200000"
    assert body["paid_from"] == {"trial_credit": "10.000000", "cash": "879.200000"}


def test_another_user_s_usage_never_appears(api: Api) -> None:
    alice, bob = api.signup(), api.signup()
    api.top_up(alice, "100")
    x = _run(api, alice, "secret-name", 600)
    for fmt in ("", "?format=csv"):
        r = api.client.get(f"/api/v1/statements/2026-01{fmt}", headers=bob)
        assert r.status_code == 200
        assert x not in r.text and "secret-name" not in r.text
    mine = api.client.get("/api/v1/statements/2026-01", headers=alice).text
    assert x in mine and "secret-name" in mine
    assert api.client.get("/api/v1/statements/2026-01").status_code == 401


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "202601", "2026-01-01", "jan", "0000-01"])
def test_a_malformed_month_is_422_with_a_clear_message(api: Api, month: str) -> None:
    r = api.client.get(f"/api/v1/statements/{month}", headers=api.signup())
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_input"
    assert "expected YYYY-MM" in r.json()["error"]["message"]


def test_a_future_month_and_a_bad_format_are_422(api: Api) -> None:
    headers = api.signup()
    r = api.client.get("/api/v1/statements/2026-02", headers=headers)
    assert r.status_code == 422 and "has not started" in r.json()["error"]["message"]
    r = api.client.get("/api/v1/statements/2026-01?format=pdf", headers=headers)
    assert r.status_code == 422 and "not json or csv" in r.json()["error"]["message"]
    current = api.client.get("/api/v1/statements/current", headers=headers).json()
    assert (current["month"], current["complete"]) == ("2026-01", False)
    empty = api.client.get("/api/v1/statements/2025-12", headers=headers).json()
    assert empty["usage_lines"] == [] and empty["closing"]["total"] == "0.000000"


def test_the_sdk_reads_json_and_csv(api: Api) -> None:
    alice = api.signup()
    key = alice["Authorization"].removeprefix("Bearer ")
    _run(api, alice, "x", 120)
    transport = api.client._transport  # the TestClient's in-process transport
    with CardhourClient("http://testserver", key, transport=transport) as client:
        st = client.statement("2026-01")
        assert [u.instance_name for u in st.usage_lines] == ["x"]
        text = client.statement_csv("2026-01")
        assert text.splitlines()[0].startswith("month,type,description")
        with pytest.raises(ApiError) as bad:
            client.statement("2026-99")
        assert (bad.value.status, bad.value.code) == (422, "invalid_input")
        with pytest.raises(ApiError) as future:
            client.statement_csv("2027-01")
        assert future.value.status == 422
