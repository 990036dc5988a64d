"""Monthly statements on both databases: usage in the month, lines that add up to what the
ledger charged, how it was paid, balances that reconcile, CSV that sums, tenant isolation."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import credit_accounts, ledger, pricing, statements, wallet
from cardhour.services.billing.credit_accounts import CreditGrant
from cardhour.services.billing.statements import Statement
from cardhour.store.compute import instances as instance_store
from tests.conftest import Api

H100 = Money.parse("1.90")


def _uid(api: Api, headers: dict[str, str]) -> str:
    secret = headers["Authorization"].removeprefix("Bearer ")
    with transaction(api.platform.sessions) as s:
        return accounts.authenticate(s, secret, api.clock.now()).id


def _statement(api: Api, uid: str, month: str) -> Statement:
    with transaction(api.platform.sessions) as s:
        return statements.statement(s, uid, month, api.clock.now(), "CNY")


def _launch(api: Api, headers: dict[str, str], name: str, **body: object) -> str:
    """Launch and wait until running (the simulated fleet provisions in 30 s)."""
    r = api.client.post(
        "/api/v1/instances", headers=headers, json={"gpu": "H100", "name": name, **body}
    )
    assert r.status_code == 201, r.text
    api.settle()
    api.settle(30)
    shown = api.client.get(f"/api/v1/instances/{name}", headers=headers).json()
    assert shown["status"] == "running", shown
    return str(shown["id"])


def _stop(api: Api, headers: dict[str, str], name: str) -> None:
    assert api.client.post(f"/api/v1/instances/{name}/stop", headers=headers).status_code == 200
    api.settle()


def _instance(api: Api, instance_id: str) -> InstanceRow:
    with transaction(api.platform.sessions) as s:
        row = instance_store.get_instance(s, instance_id)
        assert row is not None
        s.expunge(row)
        return row


def _charged_by_ledger(api: Api, instance_id: str) -> int:
    """Usage and plan charges less plan refunds, posted for the instance, in micro-units."""
    with transaction(api.platform.sessions) as s:
        total = 0
        for t in ledger.store.list_transfers_between(
            s,
            [a.id for a in ledger.store.list_accounts(s)],
            datetime(2000, 1, 1, tzinfo=UTC),
            datetime(2100, 1, 1, tzinfo=UTC),
        ):
            if t.ref == instance_id and t.kind in ("usage", "plan"):
                total += t.amount
            if t.ref == instance_id and t.kind == "plan_refund":
                total -= t.amount
        return total


def _assert_reconciles(st: Statement) -> None:
    """The identities every statement keeps."""
    assert st.opening.total + st.movements.total == st.closing.total
    assert st.credits_used + st.cash_used == st.charged
    assert st.total == st.usage_total + st.plan_total


def _assert_closing_is_the_live_balance(api: Api, uid: str, st: Statement) -> None:
    with transaction(api.platform.sessions) as s:
        live = wallet.balance(s, uid, "CNY", api.clock.now())
    credits = sum((c.balance for c in live.credits), Money.zero())
    assert (st.closing.cash, st.closing.credits, st.closing.held) == (live.cash, credits, live.held)


def test_an_instance_across_a_month_boundary_is_in_both_months(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "100")
    api.clock.advance(days=30, hours=22, minutes=59, seconds=30)
    api.settle()  # the 30-day trial credit expired at Jan 31 00:00 and is swept now
    x = _launch(api, alice, "x")  # running from Jan 31 23:00:00
    api.settle(1800)
    api.settle(1800)  # Feb 1 00:00: metering splits the segment at the boundary
    api.settle(1800)
    _stop(api, alice, "x")  # Feb 1 00:30

    jan, feb = _statement(api, uid, "2026-01"), _statement(api, uid, "2026-02")
    [jan_line] = jan.usage_lines
    [feb_line] = feb.usage_lines
    assert (jan_line.instance_name, jan_line.card_seconds, jan_line.price) == ("x", 3600, H100)
    assert jan_line.amount == Money.parse("1.90") and not jan_line.running
    assert (feb_line.card_seconds, feb_line.amount) == (1800, Money.parse("0.95"))
    assert jan_line.ended_at == datetime(2026, 2, 1, tzinfo=UTC) == feb_line.started_at
    assert jan.complete and jan.period_end == feb.period_start
    assert not feb.complete and feb.period_end == api.clock.now()

    # usage in January is 1.90, but only the first half hour was posted in January
    assert jan.movements.usage_charged == -Money.parse("0.95")
    assert feb.movements.usage_charged == -Money.parse("1.90")
    lines = sum((li.amount for st in (jan, feb) for li in st.usage_lines), Money.zero())
    assert lines.micros == _charged_by_ledger(api, x) == _instance(api, x).billed_micros
    assert jan.movements.top_ups == Money.parse("100")
    assert jan.movements.credits_granted == {"trial_credit": Money.parse("10")}
    assert jan.movements.credits_expired == {"trial_credit": -Money.parse("10")}
    assert jan.paid_from == {"cash": Money.parse("0.95")}  # the hold was funded from cash
    assert jan.closing == feb.opening
    assert jan.closing.held == Money.parse("0.95")  # the hold's unspent half, over the boundary
    for st in (jan, feb):
        _assert_reconciles(st)
    _assert_closing_is_the_live_balance(api, uid, feb)
    assert feb.closing.total == Money.parse("100") - Money.parse("2.85")


def test_an_open_segment_is_split_at_the_boundary_before_metering_does(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "100")
    api.clock.advance(days=30, hours=23, minutes=29, seconds=30)
    api.settle()
    _launch(api, alice, "y")  # running from Jan 31 23:30:00
    api.clock.advance(1800 + 20)  # Feb 1 00:00:20, no metering pass yet
    jan, feb = _statement(api, uid, "2026-01"), _statement(api, uid, "2026-02")
    assert [(li.card_seconds, li.running) for li in jan.usage_lines] == [(1800, True)]
    assert [(li.card_seconds, li.running) for li in feb.usage_lines] == [(20, True)]
    api.settle()  # metering closes January's segment; the numbers stay the same
    after = _statement(api, uid, "2026-01")
    assert [(li.card_seconds, li.amount, li.running) for li in after.usage_lines] == [
        (1800, Money.parse("0.95"), False)
    ]
    now = _statement(api, uid, "2026-02").usage_lines
    assert [(li.card_seconds, li.amount) for li in now] == [(20, feb.usage_lines[0].amount)]


def test_a_restart_at_another_price_and_a_price_change_give_separate_lines(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "100")
    x = _launch(api, alice, "x")
    api.settle(3600)
    _stop(api, alice, "x")
    with transaction(api.platform.sessions) as s:
        admin = accounts.get_user(s, uid)
        assert admin is not None
        pricing.set_price(s, api.platform.catalog, admin, "H100", "2.50", api.clock.now())
    assert api.client.post("/api/v1/instances/x/start", headers=alice).status_code == 200
    api.settle()
    api.settle(30)
    api.settle(1800)
    with transaction(api.platform.sessions) as s:  # a change while it runs splits again
        admin = accounts.get_user(s, uid)
        assert admin is not None
        later = api.clock.now() + timedelta(seconds=600)
        pricing.set_price(
            s, api.platform.catalog, admin, "H100", "3.00", api.clock.now(), None, later
        )
    api.settle(1200)
    _stop(api, alice, "x")

    st = _statement(api, uid, "2026-01")
    got = [(li.price.display(), li.card_seconds, li.amount.exact_str()) for li in st.usage_lines]
    assert got == [
        ("1.90", 3600, "1.900000"),
        ("2.50", 2400, "1.666667"),
        ("3.00", 600, "0.500000"),
    ]
    assert st.usage_total.micros == _charged_by_ledger(api, x) == _instance(api, x).billed_micros
    assert st.movements.usage_charged == -st.usage_total  # everything settled inside January
    _assert_reconciles(st)
    _assert_closing_is_the_live_balance(api, uid, st)


def test_credits_pay_first_and_plans_are_lines(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "1000")
    with transaction(api.platform.sessions) as s:
        now = api.clock.now()
        grant = CreditGrant(ledger.GRANT, Money.parse("1"), "g1", now + timedelta(days=3))
        credit_accounts.grant_credit(s, uid, grant, now)
        a800 = CreditGrant(ledger.SLA, Money.parse("5"), "s1", gpu_models=("A800",))
        credit_accounts.grant_credit(s, uid, a800, now)
    od = _launch(api, alice, "od")  # hold 1.90: grant 1.00, trial 0.90
    api.settle(7200)
    _stop(api, alice, "od")
    plan = _launch(api, alice, "plan", plan="monthly")
    api.settle(600)

    st = _statement(api, uid, "2026-01")
    assert [li.instance_name for li in st.usage_lines] == ["od"]
    [plan_line] = st.plan_lines
    assert (plan_line.instance_name, plan_line.kind) == ("plan", "plan")
    assert plan_line.amount == Money.parse("1.235").times(720)
    assert st.plan_total == plan_line.amount
    assert st.usage_total.micros == _charged_by_ledger(api, od)
    assert plan_line.amount.micros == _charged_by_ledger(api, plan)
    # 3.80 of usage: grant 1.00 then trial 2.80 (the A800-only credit is never touched);
    # the plan took all that was left of the trial credit, then cash
    assert st.paid_from == {
        "grant_credit": Money.parse("1"),
        "trial_credit": Money.parse("10"),
        "cash": st.charged - Money.parse("11"),
    }
    assert st.movements.credits_granted == {
        "grant_credit": Money.parse("1"),
        "sla_credit": Money.parse("5"),
        "trial_credit": Money.parse("10"),
    }
    assert st.closing.credits == Money.parse("5")
    _assert_reconciles(st)
    _assert_closing_is_the_live_balance(api, uid, st)


def test_what_a_hold_pays_counts_against_what_funded_it(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "100")
    api.clock.advance(days=31)  # February; the trial credit has expired
    api.settle()
    _launch(api, alice, "x")  # its hold comes from cash
    api.settle(3600)  # and is spent
    _stop(api, alice, "x")
    with transaction(api.platform.sessions) as s:
        grant = CreditGrant(ledger.GRANT, Money.parse("5"), "g-restart")
        credit_accounts.grant_credit(s, uid, grant, api.clock.now())
    assert api.client.post("/api/v1/instances/x/start", headers=alice).status_code == 200
    api.settle()
    api.settle(30)  # the new hold comes from the grant
    api.settle(60)
    _stop(api, alice, "x")
    st = _statement(api, uid, "2026-02")
    assert st.paid_from == {"grant_credit": Money.parse("0.031667"), "cash": Money.parse("1.90")}
    assert st.charged == Money.parse("1.931667") == st.usage_total
    _assert_reconciles(st)
    _assert_closing_is_the_live_balance(api, uid, st)


def test_the_csv_parses_and_sums_to_the_statement(api: Api) -> None:
    alice = api.signup()
    uid = _uid(api, alice)
    api.top_up(alice, "50")
    _launch(api, alice, "one")
    _launch(api, alice, "two", count=2)
    api.settle(1234)
    _stop(api, alice, "one")
    api.settle(99)  # "two" is still running: its line runs to now
    st = _statement(api, uid, "2026-01")
    rows = list(csv.DictReader(io.StringIO(statements.to_csv(st))))
    assert list(rows[0]) == list(statements.CSV_COLUMNS)
    by_type: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_type[row["type"]].append(row)
        assert row["month"] == "2026-01" and row["currency"] == "CNY"
        assert len(row["amount"].split(".")[1]) == 6

    def total(kind: str, description: str | None = None) -> Decimal:
        return sum(
            (Decimal(r["amount"]) for r in by_type[kind]
             if description is None or r["description"] == description),
            Decimal(0),
        )  # fmt: skip

    assert total("usage") == total("usage_total") == st.usage_total.to_decimal()
    assert [int(r["card_seconds"]) for r in by_type["usage"]] == [1234 + 30, 2 * (1234 + 99)]
    assert by_type["usage"][1]["description"] == "running (to now)"
    assert total("usage_total") + total("plan_total") == total("total")
    assert total("paid_from") == total("charged") == st.charged.to_decimal()
    opening = total("opening_balance", "total")
    closing = total("closing_balance", "total")
    assert opening + total("movement") == closing == st.closing.total.to_decimal()
    for name in ("opening_balance", "closing_balance"):
        parts = sum((total(name, p) for p in ("cash", "credits", "held")), Decimal(0))
        assert parts == total(name, "total")


def test_only_the_owner_s_data_and_empty_months(api: Api) -> None:
    alice, bob = api.signup(), api.signup()
    api.top_up(alice, "100")
    _launch(api, alice, "mine")
    api.settle(600)
    bob_st = _statement(api, _uid(api, bob), "2026-01")
    assert bob_st.usage_lines == [] and bob_st.plan_lines == []
    assert bob_st.movements.top_ups == Money.zero()
    assert bob_st.closing.total == Money.parse("10")  # his trial credit only
    before = _statement(api, _uid(api, alice), "2025-12")  # before the account existed
    assert before.usage_lines == [] and before.opening.total == before.closing.total == Money.zero()
    _assert_reconciles(bob_st)


@pytest.mark.parametrize(
    "month", ["2026-13", "2026-1", "26-01", "2026/01", "", "2026-00", "0000-01", "january"]
)
def test_a_malformed_month_is_refused(api: Api, month: str) -> None:
    with pytest.raises(InvalidInput, match="expected YYYY-MM"):
        _statement(api, _uid(api, api.signup()), month)


def test_a_future_month_is_refused(api: Api) -> None:
    with pytest.raises(InvalidInput, match="has not started"):
        _statement(api, _uid(api, api.signup()), "2026-02")
