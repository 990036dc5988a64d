"""50 simultaneous launches against a balance that covers exactly 10 hours of one instance.

PostgreSQL only: there the requests really run in parallel on separate connections (SQLite's
`BEGIN IMMEDIATE` serialises writers before any check runs). Whether the launch gate checks the
balance or moves an hour into a hold, the outcome must be the same: exactly 10 launches, 40
refusals with `insufficient_balance`, no account of the user below zero, a balanced ledger.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import or_, select

from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, LedgerAccountRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from tests.conftest import Api

LAUNCHES = 50
COVERED = 10
MODEL = "A800"  # one data centre in the demo fleet: one price, whichever the gate quotes


def hourly_price(api: Api) -> Money:
    offers = api.client.get("/api/v1/offers", params={"gpu": MODEL}).json()
    prices = {Money.parse(o["price_per_card_hour"], o["currency"]) for o in offers}
    assert len(prices) == 1, offers
    return prices.pop()


def fund_exactly(api: Api, headers: dict[str, str], amount: Money) -> None:
    """Top up cash so the balance (trial credit included) is exactly `amount`."""
    have = Money.parse(api.client.get("/api/v1/balance", headers=headers).json()["available_exact"])
    missing = amount - have
    assert missing.micros > 0
    api.top_up(headers, missing.exact_str())
    body = api.client.get("/api/v1/balance", headers=headers).json()
    assert Money.parse(body["available_exact"]) == amount


def user_accounts(api: Api, user_id: str) -> dict[str, int]:
    """Every ledger account of the user (their own and their instances' holds): key → balance."""
    with transaction(api.platform.sessions) as s:
        instance_ids = select(InstanceRow.id).where(InstanceRow.owner_id == user_id)
        rows = s.scalars(
            select(LedgerAccountRow).where(
                or_(
                    LedgerAccountRow.owner_id == user_id,
                    LedgerAccountRow.instance_id.in_(instance_ids),
                )
            )
        )
        return {row.key: ledger.balance_of(row) for row in rows}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_fifty_parallel_launches_get_exactly_what_the_balance_covers(api: Api) -> None:
    headers = api.signup()
    with transaction(api.platform.sessions) as s:
        key = headers["Authorization"].removeprefix("Bearer ")
        user_id = accounts.authenticate(s, key, api.clock.now()).id
    price = hourly_price(api)
    fund_exactly(api, headers, price.times(COVERED))

    start = threading.Barrier(LAUNCHES, timeout=60)

    def launch(i: int) -> tuple[int, str | None]:
        body = {"gpu": MODEL, "count": 1, "name": f"c{i}"}
        start.wait()  # every thread is ready: the 50 POSTs leave together
        r = api.client.post("/api/v1/instances", headers=headers, json=body)
        return r.status_code, r.json().get("error", {}).get(
            "code"
        ) if r.status_code >= 400 else None

    with ThreadPoolExecutor(max_workers=LAUNCHES) as pool:
        results = list(pool.map(launch, range(LAUNCHES)))

    codes = [code for code, _ in results]
    assert codes.count(201) == COVERED, results
    assert codes.count(402) == LAUNCHES - COVERED, results
    assert {err for code, err in results if code == 402} == {"insufficient_balance"}

    live = api.client.get("/api/v1/instances", headers=headers).json()
    assert len(live) == COVERED, live
    assert all(i["gpu"] == MODEL and i["count"] == 1 for i in live)
    for when in ("after the launches", "after they run"):
        negative = {k: v for k, v in user_accounts(api, user_id).items() if v < 0}
        assert negative == {}, when
        with transaction(api.platform.sessions) as s:
            check = ledger.verify(s)
        assert check.balanced, (when, check.problems)
        api.settle(30)  # placed, provisioned, running: still ten, still balanced
    running = api.client.get("/api/v1/instances", headers=headers).json()
    assert len(running) == COVERED
