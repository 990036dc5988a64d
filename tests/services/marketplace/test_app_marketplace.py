"""The app marketplace's catalogue and money on both databases: publish → review → listed; a
call from another account is charged once per call id and split 70/30; a refund within 7 days
reverses it; after 7 days the developer's share is available, a payout moves it, the operator
marks it paid; the ledger stays balanced throughout."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from cardhour.core.clock import ManualClock
from cardhour.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, ledger, wallet
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings
from tests.core.test_apps import GOOD


def _zip(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
    return out.getvalue()


CODE = _zip({"app.py": "def handle(request):\n    return {'hits': []}\n"})


def _user(platform: Platform, email: str, role: str = "user") -> str:
    with transaction(platform.sessions) as s:
        return customers.sign_up(
            s, email, "password123", platform.clock.now(), platform.trial(), role
        ).id


def _cny(micros: int) -> Decimal:
    return Decimal(micros) / 1_000_000


def test_publish_review_call_split_refund_mature_payout(
    platform: Platform, clock: ManualClock, tmp_path: Path
) -> None:
    dev_id, caller_id, admin_id = (
        _user(platform, "dev@example.com"),
        _user(platform, "caller@example.com"),
        _user(platform, "ops@example.com", role="admin"),
    )
    code_dir, cny = tmp_path / "apps", platform.catalog.currency

    def session():  # type: ignore[no-untyped-def]
        return transaction(platform.sessions)

    with session() as s:
        dev = accounts.get_user(s, dev_id)
        assert dev is not None
        app, v1 = apps.publish(s, dev, GOOD, CODE, code_dir, clock.now(), cny)
        assert (app.status, v1.version, v1.price_micros) == ("draft", 1, 20_000)
        assert apps.package_path(code_dir, app.id, v1.code_sha256).read_bytes() == CODE
    with session() as s, pytest.raises(NotFound):
        apps.listed(s, "doc-search")  # a draft is not in the marketplace
    with session() as s:
        dev = accounts.get_user(s, dev_id)
        caller = accounts.get_user(s, caller_id)
        admin = accounts.get_user(s, admin_id)
        assert dev and caller and admin
        apps.submit(s, dev, "doc-search", clock.now())
        with pytest.raises(Forbidden):
            apps.decide(s, caller, "doc-search", "approve", None, clock.now())
        with pytest.raises(InvalidInput, match="needs a reason"):
            apps.decide(s, admin, "doc-search", "reject", " ", clock.now())
        assert apps.decide(s, admin, "doc-search", "approve", None, clock.now()).status == "listed"
        assert [a.slug for a, _ in apps.catalogue(s, "rag")] == ["doc-search"]
        with pytest.raises(Forbidden, match="belongs to another developer"):
            apps.publish(s, caller, GOOD, CODE, code_dir, clock.now(), cny)
    with session() as s, pytest.raises(InvalidInput, match="no app.py"):
        dev = accounts.get_user(s, dev_id)
        assert dev
        apps.publish(s, dev, GOOD, _zip({"main.py": ""}), code_dir, clock.now(), cny)

    with session() as s:  # calls are paid in cash: the trial credit does not pay for them
        ledger.top_up(s, caller_id, Money.parse("1.00"), clock.now(), "caller-cash")

    def call(key: str) -> str | None:
        with session() as s:
            app = apps.listed(s, "doc-search")
            version = apps.version_of(s, app)
            new = app_earnings.NewCall(
                app.id, version.version, caller_id, dev_id, key, version.price_micros, 120
            )
            return app_earnings.record_call(s, new, clock.now())

    first = call("c-1")
    assert first is not None and call("c-1") is None  # the same call id: recorded once
    second, third = call("c-2"), call("c-3")
    assert second and third
    with session() as s:  # recorded, not posted yet: spendable cash and pending count them
        assert app_earnings.spendable(s, caller_id) == 940_000
        assert wallet.balance(s, caller_id, cny, clock.now()).cash == Money.parse("1.00")
        assert app_earnings.earnings(s, dev_id).pending == 42_000
        assert app_earnings.mature(s, clock.now() + timedelta(days=8)) == 0  # not settled
    with session() as s:
        assert app_earnings.settle(s, clock.now()) == 3
        assert app_earnings.settle(s, clock.now()) == 0
    with session() as s:
        assert app_earnings.spendable(s, caller_id) == 940_000
        balance = wallet.balance(s, caller_id, cny, clock.now())
        assert balance.cash == Money.parse("0.94")  # cash paid 3 × 0.02; the trial is untouched
        assert balance.available == Money.parse("10.94")
        mine = app_earnings.earnings(s, dev_id)
        assert (mine.calls, mine.gross, mine.developer_share) == (3, 60_000, 42_000)
        assert (mine.pending, mine.available) == (42_000, 0)
        revenue = ledger.balance_of(ledger.store.get_account(s, ledger.platform_key("revenue")))

    with session() as s:  # a refunded call reverses its split, and pays back in cash
        assert app_earnings.refund_call(s, second, clock.now()).status == "refunded"
        assert app_earnings.refund_call(s, second, clock.now()).status == "refunded"
    with session() as s:
        mine = app_earnings.earnings(s, dev_id)
        assert (mine.calls, mine.refunded, mine.pending) == (2, 1, 28_000)
        cash = wallet.balance(s, caller_id, cny, clock.now()).cash
        assert cash == Money.parse("0.96")  # the refunded call's price is back
        after = ledger.balance_of(ledger.store.get_account(s, ledger.platform_key("revenue")))
        assert revenue - after == 6_000

    clock.advance(timedelta(days=7).total_seconds() - 1)
    with session() as s:
        assert app_earnings.mature(s, clock.now()) == 0  # not 7 days yet
    clock.advance(1)
    with session() as s:
        assert app_earnings.mature(s, clock.now()) == 2
        assert app_earnings.mature(s, clock.now()) == 0
        with pytest.raises(Conflict, match="refund window"):
            app_earnings.refund_call(s, third, clock.now())
    with session() as s:
        mine = app_earnings.earnings(s, dev_id)
        assert (mine.pending, mine.available) == (0, 28_000)
        with pytest.raises(Conflict, match="only 0.02 CNY is available"):
            app_earnings.request_payout(s, dev_id, Money.parse("0.05"), clock.now(), cny)
        payout = app_earnings.request_payout(s, dev_id, None, clock.now(), cny)
        assert payout.amount_micros == 28_000
    with session() as s:
        with pytest.raises(Conflict, match="no earnings are available"):
            app_earnings.request_payout(s, dev_id, None, clock.now(), cny)
        app_earnings.mark_paid(s, payout.id, "bank-42", clock.now())
        app_earnings.mark_paid(s, payout.id, "bank-42", clock.now())  # idempotent
    with session() as s:
        mine = app_earnings.earnings(s, dev_id)
        assert (mine.available, mine.in_payout, mine.paid) == (0, 0, 28_000)
        assert ledger.verify(s).balanced


def test_a_refund_settles_a_call_not_yet_posted_then_reverses_it(
    platform: Platform, clock: ManualClock, tmp_path: Path
) -> None:
    dev_id, caller_id = _user(platform, "dev2@example.com"), _user(platform, "poor@example.com")
    cny = platform.catalog.currency
    with transaction(platform.sessions) as s:
        dev = accounts.get_user(s, dev_id)
        assert dev
        app, v1 = apps.publish(s, dev, GOOD, CODE, tmp_path, clock.now(), cny)
        assert app_earnings.spendable(s, caller_id) == 0  # the trial credit does not pay calls
        ledger.top_up(s, caller_id, Money.parse("0.05"), clock.now(), "poor-cash")
    with transaction(platform.sessions) as s:
        new = app_earnings.NewCall(app.id, 1, caller_id, dev_id, "k", v1.price_micros, 5)
        call_id = app_earnings.record_call(s, new, clock.now())
        assert call_id
    with transaction(platform.sessions) as s:
        assert app_earnings.refund_call(s, call_id, clock.now()).status == "refunded"
    with transaction(platform.sessions) as s:
        assert app_earnings.settle(s, clock.now()) == 0  # settled by the refund, once
        assert wallet.balance(s, caller_id, cny, clock.now()).cash == Money.parse("0.05")
        assert app_earnings.spendable(s, caller_id) == 50_000
        mine = app_earnings.earnings(s, dev_id)
        assert (mine.calls, mine.refunded, mine.pending) == (0, 1, 0)
        assert ledger.verify(s).balanced


def test_only_approved_versions_serve_callers(
    platform: Platform, clock: ManualClock, tmp_path: Path
) -> None:
    dev_id, admin_id = (
        _user(platform, "dev3@example.com"),
        _user(platform, "ops3@example.com", "admin"),
    )
    cny = platform.catalog.currency
    with transaction(platform.sessions) as s:
        dev, admin = accounts.get_user(s, dev_id), accounts.get_user(s, admin_id)
        assert dev and admin
        apps.publish(s, dev, GOOD, CODE, tmp_path, clock.now(), cny)
        apps.submit(s, dev, "doc-search", clock.now())
        apps.decide(s, admin, "doc-search", "approve", None, clock.now())
        dear = GOOD.replace('price_per_call: "0.02"', 'price_per_call: "10"')
        app, v2 = apps.publish(s, dev, dear, CODE, tmp_path, clock.now(), cny)
        # the new version waits for review; callers still get the approved one
        assert (app.status, app.current_version, app.live_version) == ("draft", 2, 1)
        assert apps.live_of(s, apps.listed(s, "doc-search")).price_micros == 20_000
        with pytest.raises(Conflict, match="never approved"):
            apps.rollback(s, dev, "doc-search", 2, clock.now())
        apps.submit(s, dev, "doc-search", clock.now())
        apps.decide(s, admin, "doc-search", "reject", "too dear", clock.now())
        assert apps.live_of(s, app).version == 1  # a rejected update leaves the live one
        apps.submit(s, dev, "doc-search", clock.now())
        apps.decide(s, admin, "doc-search", "approve", None, clock.now())
        assert apps.live_of(s, app).price_micros == 10_000_000
        apps.rollback(s, dev, "doc-search", 1, clock.now())  # approved before: at once
        assert (app.live_version, app.status) == (1, "listed")
        apps.decide(s, admin, "doc-search", "delist", "gone", clock.now())
        with pytest.raises(NotFound):
            apps.listed(s, "doc-search")
