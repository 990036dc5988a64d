"""Grant hours in the ledger: a team's grant pays its members' usage of the granted models
first, never other models or other users, and what is left expires at the period's end."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from cardhour.core.errors import Conflict, InvalidInput
from cardhour.core.money import MILLI_GPU_SECONDS_PER_CARD_HOUR as HOUR
from cardhour.core.money import card_time_for, card_time_value
from cardhour.db.engine import transaction
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.services.grants import hours as grant_hours
from cardhour.store.grants import hours as grant_store
from tests.conftest import Api


def _user_id(api: Api, headers: dict[str, str]) -> str:
    with transaction(api.platform.sessions) as s:
        key = headers["Authorization"].removeprefix("Bearer ")
        return accounts.authenticate(s, key, api.clock.now()).id


def _issue(
    api: Api,
    members: list[str],
    hours: int = 50_000,
    days: int = 30,
    grant_id: str = "g1",
    start: datetime | None = None,
) -> str:
    """Issue a grant of `hours` H100 card-hours for `days` from `start` (default now)."""
    now = api.clock.now()
    valid_from = start or now
    with transaction(api.platform.sessions) as s:
        return grant_hours.issue(
            s,
            grant_id=grant_id,
            proposal_id=None,
            title="Protein folding at scale",
            member_ids=members,
            card_hours=hours,
            gpu_models=("H100",),
            valid_from=valid_from,
            expires_at=valid_from + timedelta(days=days),
            now=now,
        ).id


def _admin(api: Api) -> dict[str, str]:
    email, password = api.platform.bootstrap_admin()
    r = api.client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def _report(api: Api) -> grant_hours.GrantReport:
    with transaction(api.platform.sessions) as s:
        return grant_hours.report(s, "g1", api.clock.now())


def _balance(api: Api, headers: dict[str, str]) -> dict:
    r = api.client.get("/api/v1/balance", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def _launch(api: Api, headers: dict[str, str], name: str, gpu: str, count: int) -> dict:
    body = {"gpu": gpu, "count": count, "name": name}
    r = api.client.post("/api/v1/instances", headers=headers, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _run(api: Api, seconds: int, step: int = 60) -> None:
    for _ in range(seconds // step):
        api.settle(step)


def _stop(api: Api, headers: dict[str, str], name: str) -> dict:
    r = api.client.post(f"/api/v1/instances/{name}/stop", headers=headers)
    assert r.status_code == 200, r.text
    api.settle()
    got = api.client.get(f"/api/v1/instances/{name}", headers=headers).json()
    assert got["status"] == "stopped", got
    return dict(got)


def _verified(api: Api) -> None:
    with transaction(api.platform.sessions) as s:
        check = ledger.verify(s)
    assert check.balanced, check.problems


def test_grant_hours_pay_matching_usage_first_then_expire(api: Api) -> None:
    lead, member, outsider = api.signup(), api.signup(), api.signup()
    _issue(api, [_user_id(api, lead), _user_id(api, member)])
    trial = _balance(api, member)["available_exact"]
    # 8 × H100 for an hour would need a 15.20 CNY hold: the grant stands in for it
    _launch(api, member, "big", "H100", 8)
    _launch(api, member, "small", "A800", 1)
    api.settle()
    api.settle(30)  # both running from here
    _run(api, 3600)
    big, small = _stop(api, member, "big"), _stop(api, member, "small")
    assert Decimal(big["cost_so_far"]) == Decimal("15.200000")  # 8 card-hours × 1.90
    assert Decimal(small["cost_so_far"]) == Decimal("1.200000")  # the A800 is not granted
    # the member paid the A800 hour only (from the trial credit); the grant paid the H100s
    assert Decimal(_balance(api, member)["available_exact"]) == Decimal(trial) - Decimal("1.20")
    month = f"{api.clock.now():%Y-%m}"
    st = api.client.get(f"/api/v1/statements/{month}", headers=member).json()
    assert (st["paid_by_grants"], st["grant_card_hours"]) == ("15.200000", "8.000")
    assert st["charged"] == "1.200000"  # what the member's own accounts paid: the A800
    csv = api.client.get(f"/api/v1/statements/{month}?format=csv", headers=member).text
    assert ",paid_by_grants,8.000 card-hours of team grants (not in charged)," in csv
    report = _report(api)
    assert report.status == "active"
    # 8 card-hours, up to 1 milli-GPU-second of rounding per charge
    assert 8 * HOUR <= report.used_milli_gpu_seconds <= 8 * HOUR + 60
    assert report.used_card_hours == "8.000"
    assert [line.name for line in report.by_instance] == ["big"]
    assert [line.key for line in report.by_member] == [_user_id(api, member)]
    assert report.remaining_milli_gpu_seconds == 50_000 * HOUR - report.used_milli_gpu_seconds
    # 8 card-hours in the grant's first 3,630 s: about 190 a day
    assert 185 < Decimal(report.burn_rate_card_hours_per_day) < 195
    assert report.runs_out_at is None  # 49,992 h left would last 263 days: past the expiry
    # the team sees the report; nobody else does; the operator sees every grant
    mine = api.client.get("/api/v1/grants", headers=lead).json()
    assert [(g["grant_id"], g["used_card_hours"]) for g in mine] == [("g1", "8.000")]
    got = api.client.get("/api/v1/grants/g1", headers=member).json()
    assert got["by_instance"][0]["name"] == "big" and got["remaining_card_hours"] == "49991.999"
    assert api.client.get("/api/v1/grants/g1", headers=outsider).status_code == 404
    assert api.client.get("/api/v1/grants", headers=outsider).json() == []
    assert api.client.get("/api/v1/admin/grants", headers=member).status_code == 403
    board = api.client.get("/api/v1/admin/grants", headers=_admin(api)).json()
    assert (board["grants"], board["active"], board["used_card_hours"]) == (1, 1, "8.000")
    # someone outside the team pays for their own H100
    before = Decimal(_balance(api, outsider)["available_exact"])
    _launch(api, outsider, "theirs", "H100", 1)
    api.settle()
    api.settle(30)
    _run(api, 600)
    _stop(api, outsider, "theirs")
    assert Decimal(_balance(api, outsider)["available_exact"]) == before - Decimal("0.316667")
    assert _report(api).used_milli_gpu_seconds == report.used_milli_gpu_seconds
    # the period ends: what is left goes back to the platform; usage after it is paid in money
    api.settle(30 * 86_400)
    report = _report(api)
    assert report.status == "expired"
    assert report.remaining_milli_gpu_seconds == 0
    assert report.expired_milli_gpu_seconds == 50_000 * HOUR - report.used_milli_gpu_seconds
    api.top_up(member, "20")
    start = Decimal(_balance(api, member)["available_exact"])
    r = api.client.post("/api/v1/instances/big/start", headers=member)
    assert r.status_code == 200, r.text
    api.settle()
    api.settle(30)
    _run(api, 600)
    _stop(api, member, "big")
    left = Decimal(_balance(api, member)["available_exact"])
    assert left == start - Decimal("2.533333")  # 8 × 1.90 / 6
    assert _report(api).used_milli_gpu_seconds == report.used_milli_gpu_seconds
    with transaction(api.platform.sessions) as s:
        board = grant_hours.dashboard(s, api.clock.now())
    assert (board.grants, board.active, board.granted_card_hours) == (1, 0, "50000.000")
    assert board.used_card_hours == "8.000"
    line = board.lines[0]
    assert line.used_milli_gpu_seconds + line.expired_milli_gpu_seconds == 50_000 * HOUR
    _verified(api)


def test_grant_hours_run_out_then_money_pays(api: Api) -> None:
    member = api.signup()
    _issue(api, [_user_id(api, member)], hours=1)
    api.top_up(member, "50")
    start = Decimal(_balance(api, member)["available_exact"])
    _launch(api, member, "two", "H100", 2)
    api.settle()
    api.settle(30)
    _run(api, 3600)
    got = _stop(api, member, "two")
    assert Decimal(got["cost_so_far"]) == Decimal("3.800000")  # 2 card-hours
    # one card-hour from the grant, the other (1.90) from the member's money; card time is
    # rounded up per charge (≤ 1 milli-GPU-second, 0.53 µCNY here), so the grant pays a hair less
    paid = start - Decimal(_balance(api, member)["available_exact"])
    assert Decimal("1.90") <= paid <= Decimal("1.900100")
    report = _report(api)
    assert report.remaining_milli_gpu_seconds < 2  # rounding leaves at most a few ms
    assert report.used_card_hours in ("0.999", "1.000")
    _verified(api)


def test_issue_checks_terms_and_is_idempotent(api: Api) -> None:
    member = _user_id(api, api.signup())
    _issue(api, [member])
    _issue(api, [member])  # the same grant again: nothing new
    with pytest.raises(Conflict):
        _issue(api, [member], hours=40_000)
    now = api.clock.now()
    for hours in (0, 100_001):
        with pytest.raises(InvalidInput, match="1 to 100,000 card-hours"):
            _issue(api, [member], hours=hours, days=1, grant_id="g2")
    with transaction(api.platform.sessions) as s:
        account = grant_store.account(s, ledger.grant_hours_key("g1"))
        assert account is not None and ledger.balance_of(account) == 50_000 * HOUR
    _verified(api)
    api.settle(31 * 86_400)  # a retried approval after the period ended gets the same grant
    assert _issue(api, [member], start=now) == "g1"
    with pytest.raises(InvalidInput, match="cannot expire before it is issued"):
        _issue(api, [member], hours=1, grant_id="g3", start=now)


@pytest.mark.parametrize("price", [1, 7, 1_900_000, 250_000_000])
@pytest.mark.parametrize("time", [0, 1, 3599, HOUR, 123_456_789])
def test_card_time_conversions_never_overpay(price: int, time: int) -> None:
    value = card_time_value(time, price)
    assert value * HOUR <= time * price < (value + 1) * HOUR
    needed = card_time_for(value, price)
    assert needed <= time
    assert needed * price >= value * HOUR
