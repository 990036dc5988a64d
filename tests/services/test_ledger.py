"""The ledger on both databases: trial credit once, idempotent transfers, invariants."""

from __future__ import annotations

import pytest

from cardhour.core.clock import ManualClock
from cardhour.core.errors import Conflict
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services import accounts, ledger


def _user(platform: Platform, clock: ManualClock, email: str = "a@example.com") -> str:
    with transaction(platform.sessions) as s:
        return accounts.sign_up(s, email, "password123", clock.now(), platform.trial_credit).id


def test_trial_credit_is_granted_exactly_once(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        ledger.grant_trial_credit(s, uid, platform.trial_credit, clock.now())  # a retry
        bal = ledger.balance(s, uid, "CNY")
    assert bal.trial_credit == Money.parse("10.00") and bal.cash == Money.zero()
    with pytest.raises(Conflict, match="already exists"), transaction(platform.sessions) as s:
        accounts.sign_up(s, "A@example.com", "password123", clock.now(), platform.trial_credit)


def test_transfer_ids_are_idempotency_keys(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("5"), clock.now(), "pay-1")
        ledger.top_up(s, uid, Money.parse("5"), clock.now(), "pay-1")
        assert ledger.balance(s, uid, "CNY").cash == Money.parse("5")
    with pytest.raises(Conflict, match="different parameters"), transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("6"), clock.now(), "pay-1")


def test_usage_spends_trial_credit_first_then_cash(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        ledger.top_up(s, uid, Money.parse("3"), clock.now(), "pay-2")
        ledger.charge_usage(s, uid, Money.parse("12.5"), "usage:x:0", clock.now(), "x")
        bal = ledger.balance(s, uid, "CNY")
        assert bal.trial_credit == Money.zero()
        assert bal.cash == Money.parse("0.5")
        check = ledger.verify(s)
    assert check.balanced, check.problems
    assert check.transfers == 4  # trial, top-up, usage from trial, usage from cash


def test_verify_detects_a_tampered_balance(platform: Platform, clock: ManualClock) -> None:
    uid = _user(platform, clock)
    with transaction(platform.sessions) as s:
        row = ledger.store.get_account(s, ledger.user_key(uid, "cash"))
        assert row is not None
        row.credits_posted += 1
    with transaction(platform.sessions) as s:
        check = ledger.verify(s)
    assert not check.balanced
    assert any("cached totals" in p for p in check.problems)
