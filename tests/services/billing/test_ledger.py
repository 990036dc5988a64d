"""The ledger on both databases: trial credit once, idempotent transfers, credits in order,
expiry, holds, invariants."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cardhour.core.clock import ManualClock
from cardhour.core.errors import Conflict, InsufficientBalance, InvalidInput
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow
from cardhour.platform import Platform
from cardhour.services.billing import credit_accounts, customers, ledger, wallet
from cardhour.services.billing.credit_accounts import CreditGrant


def _user(platform: Platform, clock: ManualClock, email: str = "a@example.com") -> str:
    with transaction(platform.sessions) as s:
        return customers.sign_up(s, email, "password123", clock.now(), platform.trial()).id


def _balance(platform: Platform, clock: ManualClock, uid: str) -> wallet.Balance:
    with transaction(platform.sessions) as s:
        return wallet.balance(s, uid, "CNY", clock.now())


def _charge(platform: Platform, clock: ManualClock, row: InstanceRow, amount: str, n: int) -> None:
    with transaction(platform.sessions) as s:
        book = wallet.open_wallet(s, clock.now(), [row.owner_id], ["revenue"])
        wallet.charge(book, row, Money.parse(amount).micros, f"usage:{row.id}:{n}", "usage")
        book.flush()


def _fake_instance(uid: str, model: str = "H100") -> InstanceRow:
    """Enough of an instance for the wallet (it reads id, owner and model)."""
    return InstanceRow(id=f"i{model}{uid[:6]}", owner_id=uid, gpu_model=model, currency="CNY")


def _verify(platform: Platform) -> ledger.Verification:
    with transaction(platform.sessions) as s:
        return ledger.verify(s)


def test_trial_credit_is_granted_exactly_once_and_expires(
    platform: Platform, clock: ManualClock
) -> None:
    uid = _user(platform, clock)
    expires = clock.now() + timedelta(days=30)
    with transaction(platform.sessions) as s:
        grant = CreditGrant(ledger.TRIAL, Money.parse("10"), f"trial-{uid}", expires)
        credit_accounts.grant_credit(s, uid, grant, clock.now())  # a retry moves nothing
    with pytest.raises(Conflict, match="different terms"), transaction(platform.sessions) as s:
        grant = CreditGrant(ledger.TRIAL, Money.parse("10"), f"trial-{uid}")  # never expires
        credit_accounts.grant_credit(s, uid, grant, clock.now())
    bal = _balance(platform, clock, uid)
    assert bal.credit_of(ledger.TRIAL) == Money.parse("10.00") and bal.cash == Money.zero()
    assert bal.credits[0].expires_at == clock.now() + timedelta(days=30)
    with pytest.raises(Conflict, match="already exists"), transaction(platform.sessions) as s:
        customers.sign_up(s, "A@example.com", "password123", clock.now(), platform.trial())
    clock.advance(days=30)
    with transaction(platform.sessions) as s:
        assert credit_accounts.expire_credits(s, clock.now()) == 1
        assert credit_accounts.expire_credits(s, clock.now()) == 0  # swept once
    assert _balance(platform, clock, uid).available == Money.zero()
    assert _verify(platform).balanced


def test_transfer_ids_are_idempotency_keys(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("5"), clock.now(), "pay-1")
        ledger.top_up(s, uid, Money.parse("5"), clock.now(), "pay-1")
    assert _balance(platform, clock, uid).cash == Money.parse("5")
    with pytest.raises(Conflict, match="different parameters"), transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("6"), clock.now(), "pay-1")


def test_usage_spends_credits_in_order_then_cash_even_below_zero(
    platform: Platform, clock: ManualClock
) -> None:
    uid = _user(platform, clock)  # trial 10 (priority 30)
    soon = clock.now() + timedelta(days=2)
    with transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("3"), clock.now(), "pay-2")
        for credit_id, amount, models, expires in (
            ("g-a800", "4", ("A800",), None),  # another model: never used for H100
            ("g-h100", "2", ("H100",), None),  # grant for H100, priority 10: first
            ("sla-1", "1", (), soon),  # SLA, priority 20: second
        ):
            kind = ledger.SLA if credit_id.startswith("sla") else ledger.GRANT
            grant = CreditGrant(kind, Money.parse(amount), credit_id, expires, models)
            credit_accounts.grant_credit(s, uid, grant, clock.now())
    row = _fake_instance(uid)
    _charge(platform, clock, row, "13.5", 0)  # 2 grant + 1 SLA + 10 trial + 0.5 cash
    bal = _balance(platform, clock, uid)
    by_key = {c.key.rsplit(":", 1)[-1]: c.balance for c in bal.credits}
    assert by_key == {
        "g-a800": Money.parse("4"),
        "g-h100": Money.zero(),
        "sla-1": Money.zero(),
        "trial_credit": Money.zero(),
    }
    assert bal.cash == Money.parse("2.5")
    _charge(platform, clock, row, "3", 1)  # cash may go below zero for usage that ran
    assert _balance(platform, clock, uid).cash == Money.parse("-0.5")
    check = _verify(platform)
    assert check.balanced, check.problems


def test_a_limited_credit_never_pays_for_another_model(
    platform: Platform, clock: ManualClock
) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        grant = CreditGrant(ledger.GRANT, Money.parse("50"), "g1", gpu_models=("H100",))
        credit_accounts.grant_credit(s, uid, grant, clock.now())
    a800 = _fake_instance(uid, "A800")
    _charge(platform, clock, a800, "11", 0)  # trial 10, then cash -1; the H100 grant untouched
    bal = _balance(platform, clock, uid)
    assert bal.cash == Money.parse("-1")
    assert [c.balance for c in bal.credits if c.kind == ledger.GRANT] == [Money.parse("50")]


def test_holds_move_money_aside_and_go_back_where_it_came_from(
    platform: Platform, clock: ManualClock
) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("5"), clock.now(), "pay-3")
    row = _fake_instance(uid)
    with transaction(platform.sessions) as s:
        wallet.place_hold(s, row, Money.parse("12"), clock.now())  # trial 10 + cash 2
    bal = _balance(platform, clock, uid)
    assert (bal.held, bal.cash, bal.available) == (
        Money.parse("12"),
        Money.parse("3"),
        Money.parse("3"),
    )
    with pytest.raises(InsufficientBalance), transaction(platform.sessions) as s:
        wallet.place_hold(s, row, Money.parse("3.01"), clock.now())
    _charge(platform, clock, row, "4", 0)  # captured from the hold: spent from the trial first
    with transaction(platform.sessions) as s:
        assert wallet.release_hold(s, row, clock.now()) == Money.parse("8").micros
        assert wallet.release_hold(s, row, clock.now()) == 0
    bal = _balance(platform, clock, uid)
    assert bal.held == Money.zero()
    assert bal.cash == Money.parse("5")  # cash's 2 came back first
    assert bal.credit_of(ledger.TRIAL) == Money.parse("6")
    check = _verify(platform)
    assert check.balanced, check.problems


def test_bad_credits_are_refused(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with pytest.raises(InvalidInput), transaction(platform.sessions) as s:
        past = clock.now() - timedelta(seconds=1)
        credit_accounts.grant_credit(
            s, uid, CreditGrant(ledger.SLA, Money.parse("1"), "x", past), clock.now()
        )
    with pytest.raises(InvalidInput), transaction(platform.sessions) as s:
        credit_accounts.grant_credit(
            s, uid, CreditGrant("gift", Money.parse("1"), "y"), clock.now()
        )


def test_verify_detects_a_tampered_balance(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        row = ledger.store.get_account(s, ledger.user_key(uid, "cash"))
        assert row is not None
        row.credits_posted += 1
    check = _verify(platform)
    assert not check.balanced
    assert any("cached totals" in p for p in check.problems)
