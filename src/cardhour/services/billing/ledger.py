"""The double-entry ledger: accounts, immutable idempotent transfers, verification (a credit's
account is granted and expired by `services.billing.credit_accounts`).

Conventions (docs/dev/billing.md):
- Every account's balance is credits − debits. User accounts (`cash`, the credit kinds, `hold`)
  are what the platform owes the user; platform accounts are the other side, so they go negative.
- A transfer moves a positive amount from one account to another (debits equal credits by
  construction), is never edited, and its id is its idempotency key: posting the same id again
  with the same parameters returns the first one, with different parameters it is refused.
- Lock order: every transaction locks the accounts it posts to in ONE call, sorted by key, after
  any instance rows it locks; `grant:*` keys sort before `platform:*` keys, and those before
  every `user:*` key (holds included), so a transaction that locks again later only ever adds
  user accounts.
- Accounts have a unit: the deployment's currency (micro-units), or card time (`MGS`) for grant
  hours; a transfer never crosses units.
- Balance limits are checked on the locked rows in the transaction that posts (no check-then-act):
  credit and hold accounts never go below zero; cash only through usage that ran before an
  auto-stop (at most about a minute of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.errors import Conflict
from cardhour.core.money import CARD_TIME_UNIT, Money
from cardhour.db.models import LedgerAccountRow, LedgerTransferRow
from cardhour.store.billing import ledger as store

CASH = "cash"
TRIAL = "trial_credit"
SLA = "sla_credit"
GRANT = "grant_credit"
HOLD = "hold"
#: A team's grant of card-hours, in card time (`CARD_TIME_UNIT`), keyed `grant:<grant id>`,
#: owned by no single user (`services.grant_hours`).
GRANT_HOURS = "grant_hours"
CREDIT_KINDS = (GRANT, SLA, TRIAL)
#: Default spending priority of each credit kind (lower is spent first; cash always last).
DEFAULT_PRIORITY = {GRANT: 10, SLA: 20, TRIAL: 30}
#: The platform account each credit kind is issued from and expires back to.
ISSUER = {TRIAL: "promotions", SLA: "sla", GRANT: "grants", GRANT_HOURS: "grant_hours_pool"}
PLATFORM_KINDS = ("promotions", "sla", "grants", "revenue", "cash_in", "app_sales", "app_payouts")
#: What the platform owes app developers (`services.app_earnings`): never below zero.
EARNING_KINDS = ("app_earnings_pending", "app_earnings_available", "app_payout")
#: Platform accounts in card time: grant hours are issued from (and expire back to) the first;
#: the second counts the hours spent. Opened with the first grant.
PLATFORM_CARD_TIME_KINDS = ("grant_hours_pool", "grant_hours_used")


def user_key(user_id: str, kind: str) -> str:
    return f"user:{user_id}:{kind}"


def credit_key(user_id: str, credit_id: str) -> str:
    return f"user:{user_id}:credit:{credit_id}"


def grant_hours_key(grant_id: str) -> str:
    """Sorts before every `platform:*` and `user:*` key (the lock order)."""
    return f"grant:{grant_id}"


def hold_key(owner_id: str, instance_id: str) -> str:
    """Under the owner's keys, so every `platform:*` lock is taken before any hold's."""
    return f"user:{owner_id}:hold:{instance_id}"


def platform_key(kind: str) -> str:
    return f"platform:{kind}"


@dataclass(slots=True)
class Account:
    """A ledger account as locked for one transaction (its totals move with `Book.transfer`)."""

    id: int
    key: str
    owner_id: str | None
    kind: str
    currency: str
    debits_posted: int
    credits_posted: int
    created_at: datetime | None
    expires_at: datetime | None
    gpu_models: str | None
    priority: int
    instance_id: str | None
    valid_from: datetime | None = None


def balance_of(row: Account | LedgerAccountRow) -> int:
    return row.credits_posted - row.debits_posted


def _ensure(
    session: Session, key: str, kind: str, currency: str, owner: str | None, **attrs: Any
) -> LedgerAccountRow:
    row = store.get_account(session, key)
    if row is None:
        row = store.add_account(
            session,
            LedgerAccountRow(
                key=key,
                owner_id=owner,
                kind=kind,
                currency=currency,
                debits_posted=0,
                credits_posted=0,
                **attrs,
            ),
        )
    return row


def ensure_account(
    session: Session, key: str, kind: str, unit: str, owner: str | None = None, **attrs: Any
) -> LedgerAccountRow:
    """The account `key`, opened with `attrs` if it does not exist yet."""
    return _ensure(session, key, kind, unit, owner, **attrs)


def ensure_platform_accounts(session: Session, currency: str) -> None:
    """The platform's money accounts in `currency` and its card-time accounts (opened at boot,
    so two first grants approved at once do not both insert them)."""
    for kind in PLATFORM_KINDS:
        _ensure(session, platform_key(kind), kind, currency, None)
    for kind in PLATFORM_CARD_TIME_KINDS:
        _ensure(session, platform_key(kind), kind, CARD_TIME_UNIT, None)


def open_user_accounts(session: Session, user_id: str, currency: str, now: datetime) -> None:
    ensure_platform_accounts(session, currency)
    _ensure(session, user_key(user_id, CASH), CASH, currency, user_id, created_at=now)


def ensure_hold_account(
    session: Session, owner_id: str, instance_id: str, currency: str, now: datetime
) -> None:
    _ensure(
        session,
        hold_key(owner_id, instance_id),
        HOLD,
        currency,
        owner_id,
        instance_id=instance_id,
        created_at=now,
    )


def open_hold_account(
    session: Session, owner_id: str, instance_id: str, currency: str, now: datetime
) -> None:
    """`ensure_hold_account` for an instance created in this transaction: its hold account
    cannot exist yet, so it is inserted without a look-up."""
    store.insert_account(
        session,
        {
            "key": hold_key(owner_id, instance_id),
            "owner_id": owner_id,
            "kind": HOLD,
            "currency": currency,
            "debits_posted": 0,
            "credits_posted": 0,
            "instance_id": instance_id,
            "created_at": now,
        },
    )


@dataclass
class Book:
    """Accounts locked for one transaction and the transfers posted against them.

    Balances move in memory as transfers are added, so later decisions in the same transaction
    see earlier ones; `flush` writes all pending transfers in one INSERT and the account totals
    in one executemany UPDATE (in-database increments).
    """

    session: Session
    now: datetime
    accounts: dict[str, Account]
    _rows: list[dict[str, Any]] = field(default_factory=list)
    _deltas: dict[int, list[int]] = field(default_factory=dict)
    _by_owner: dict[str, list[Account]] | None = None
    _sources: dict[tuple[str, str], list[Account]] = field(default_factory=dict)
    #: owner id -> keys of the team grant-hours accounts the owner may spend (locked here too)
    shared: dict[str, list[str]] = field(default_factory=dict)
    posted: int = 0

    def row(self, key: str) -> Account:
        try:
            return self.accounts[key]
        except KeyError:
            raise KeyError(f"account {key} is not locked in this book") from None

    def balance(self, key: str) -> int:
        return balance_of(self.row(key))

    def owned(self, owner_id: str) -> list[Account]:
        if self._by_owner is None:
            self._by_owner = {}
            for row in self.accounts.values():
                if row.owner_id is not None:
                    self._by_owner.setdefault(row.owner_id, []).append(row)
        return self._by_owner.get(owner_id, [])

    def transfer(
        self, transfer_id: str, debit: str, credit: str, amount: int, kind: str, ref: str | None
    ) -> None:
        """Queue one transfer; the caller has checked any balance limit on the locked rows."""
        if amount <= 0:
            raise ValueError("a transfer moves a positive amount")
        src, dst = self.row(debit), self.row(credit)
        if src.currency != dst.currency:
            raise Conflict("currency mismatch in transfer")
        self._rows.append(
            {
                "id": transfer_id,
                "debit_account_id": src.id,
                "credit_account_id": dst.id,
                "amount": amount,
                "currency": src.currency,
                "kind": kind,
                "ref": ref,
                "created_at": self.now,
            }
        )
        src.debits_posted += amount
        dst.credits_posted += amount
        self._deltas.setdefault(src.id, [0, 0])[0] += amount
        self._deltas.setdefault(dst.id, [0, 0])[1] += amount

    def flush(self) -> None:
        store.insert_transfers(self.session, self._rows)
        store.add_totals(self.session, {aid: (d, c) for aid, (d, c) in self._deltas.items()})
        self.posted += len(self._rows)
        self._rows, self._deltas = [], {}


def open_book(
    session: Session, now: datetime, keys: Sequence[str] = (), owners: Sequence[str] = ()
) -> Book:
    """Lock `keys` and every account of `owners` in one sorted call (the lock order)."""
    rows = store.lock_accounts(session, keys, owners)
    return Book(session, now, {r["key"]: Account(**r) for r in rows})


def post(
    session: Session,
    transfer_id: str,
    debit: str,
    credit: str,
    amount: Money,
    kind: str,
    now: datetime,
    ref: str | None = None,
) -> LedgerTransferRow:
    """Post one balanced transfer, idempotently by `transfer_id` (no balance limit checked)."""
    if amount.micros <= 0:
        raise ValueError("a transfer moves a positive amount")
    book = open_book(session, now, [debit, credit])
    src, dst = book.row(debit), book.row(credit)
    existing = store.get_transfer(session, transfer_id)
    if existing is not None:
        same = (existing.debit_account_id, existing.credit_account_id, existing.amount) == (
            src.id,
            dst.id,
            amount.micros,
        )
        if not same:
            raise Conflict(f"transfer {transfer_id} exists with different parameters")
        return existing
    if amount.currency != src.currency:
        raise Conflict("currency mismatch in transfer")
    book.transfer(transfer_id, debit, credit, amount.micros, kind, ref)
    book.flush()
    row = store.get_transfer(session, transfer_id)
    assert row is not None
    return row


def top_up(session: Session, user_id: str, amount: Money, now: datetime, reference: str) -> None:
    """Cash paid in (admin or payment provider); idempotent on `reference`."""
    post(
        session,
        f"topup:{reference}",
        platform_key("cash_in"),
        user_key(user_id, CASH),
        amount,
        "top_up",
        now,
        ref=user_id,
    )


@dataclass(frozen=True)
class Verification:
    balanced: bool
    accounts: int
    transfers: int
    total_debits: int  # micro-units, over all transfers
    total_credits: int
    negative_credit_accounts: int
    negative_hold_accounts: int
    problems: list[str]


def verify(session: Session) -> Verification:
    """Recompute every account from the transfers and check the ledger's invariants:
    each account's cached totals equal its transfers, debits equal credits in each unit, no
    transfer is non-positive or moves between units (money and card time), no credit or hold
    account is below zero. `total_debits`/`total_credits` add every unit together."""
    accounts = store.list_accounts(session)
    count, debits, credits, bad = store.transfer_sums(session)
    problems = [f"transfer {t} has a non-positive amount" for t in bad]
    problems += [f"transfer {t} moves between units" for t in store.cross_unit_transfers(session)]
    negative_credit = negative_hold = 0
    for a in accounts:
        if (a.debits_posted, a.credits_posted) != (debits.get(a.id, 0), credits.get(a.id, 0)):
            problems.append(
                f"account {a.key}: cached totals {a.debits_posted}/{a.credits_posted} differ "
                f"from its transfers {debits.get(a.id, 0)}/{credits.get(a.id, 0)}"
            )
        if balance_of(a) < 0 and a.kind in (*CREDIT_KINDS, GRANT_HOURS):
            negative_credit += 1
            problems.append(f"account {a.key}: credit balance below zero")
        if balance_of(a) < 0 and a.kind in EARNING_KINDS:
            negative_credit += 1
            problems.append(f"account {a.key}: earnings balance below zero")
        if balance_of(a) < 0 and a.kind == HOLD:
            negative_hold += 1
            problems.append(f"account {a.key}: hold balance below zero")
    total_d, total_c = sum(debits.values()), sum(credits.values())
    if total_d != total_c:
        problems.append("total debits differ from total credits")
    unit_of = {a.id: a.currency for a in accounts}
    by_unit: dict[str, list[int]] = {}
    for sums, side in ((debits, 0), (credits, 1)):
        for aid, amount in sums.items():
            by_unit.setdefault(unit_of.get(aid, "?"), [0, 0])[side] += amount
    for unit, (d, c) in sorted(by_unit.items()):
        if d != c:
            problems.append(f"debits differ from credits in {unit}")
    known = {a.id for a in accounts}
    if set(debits) - known or set(credits) - known:
        problems.append("transfers name accounts that do not exist")
    return Verification(
        balanced=not problems,
        accounts=len(accounts),
        transfers=count,
        total_debits=total_d,
        total_credits=total_c,
        negative_credit_accounts=negative_credit,
        negative_hold_accounts=negative_hold,
        problems=problems,
    )
