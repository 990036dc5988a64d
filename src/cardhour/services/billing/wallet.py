"""A user's money as spending sources: credits in a documented order, then cash; holds.

Spending order for usage of GPU model `m` at `now` (docs/dev/billing.md):
0. for usage only: grant hours of the owner's teams usable for `m` (valid at `now`, soonest
   expiry first), in card time converted at the instance's price (`services.grant_hours`);
1. the instance's own hold account, if it has one (money set aside at launch);
2. credit accounts usable for `m` — not expired at `now`, and `m` among their models if they are
   limited — by ascending priority (grants 10, SLA 20, trial 30 by default), then soonest expiry,
   then oldest;
3. cash.
Credits never go below zero. Cash goes below zero only for usage that already ran (`overdraft`),
never for a hold or a prepaid plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import InsufficientBalance
from cardhour.core.money import Money, card_time_for, card_time_value
from cardhour.db.models import InstanceRow
from cardhour.services.billing import ledger
from cardhour.services.billing.ledger import CASH, CREDIT_KINDS, HOLD, Account, Book
from cardhour.store.billing import ledger as store
from cardhour.store.billing.usage import Rated

_FAR = datetime.max.replace(tzinfo=UTC)
#: what a run without GPUs draws as (no credit is tied to it: untied credits, then cash)
NO_GPU = "no-gpu"


def paid_as(row: Rated) -> str:
    """What an instance's holds and charges draw as: its GPU model (credits tied to it, grant
    hours for it); `NO_GPU` for a run without GPUs (neither)."""
    return NO_GPU if row.no_gpu else row.gpu_model


def usable(row: Account, gpu_model: str | None, now: datetime) -> bool:
    """Whether a credit account may pay for `gpu_model` (None: any use) at `now`."""
    if row.kind not in CREDIT_KINDS:
        return False
    if row.expires_at is not None and as_utc(row.expires_at) <= now:
        return False
    if row.gpu_models:
        return gpu_model is not None and gpu_model in row.gpu_models.split(",")
    return True


def _order(row: Account) -> tuple[int, datetime, datetime, int]:
    expires = as_utc(row.expires_at) if row.expires_at is not None else _FAR
    created = as_utc(row.created_at) if row.created_at is not None else _FAR
    return (row.priority, expires, created, row.id)


def sources(book: Book, owner_id: str, gpu_model: str) -> list[Account]:
    """The owner's accounts that may pay for `gpu_model` now, in spending order (cash last).
    The order does not depend on balances, so the book keeps it."""
    key = (owner_id, gpu_model)
    if key not in book._sources:
        credits = sorted(
            (r for r in book.owned(owner_id) if usable(r, gpu_model, book.now)), key=_order
        )
        cash = book.accounts.get(ledger.user_key(owner_id, CASH))
        book._sources[key] = credits + ([cash] if cash is not None else [])
    return book._sources[key]


def grant_sources(book: Book, owner_id: str, gpu_model: str) -> list[Account]:
    """The team grant-hours accounts the owner may spend on `gpu_model` now: valid, not
    expired, for that model; soonest expiry first."""
    key = (f"grant:{owner_id}", gpu_model)
    if key not in book._sources:
        found = []
        for account_key in book.shared.get(owner_id, []):
            row = book.row(account_key)
            if row.valid_from is not None and as_utc(row.valid_from) > book.now:
                continue
            if row.expires_at is not None and as_utc(row.expires_at) <= book.now:
                continue
            if row.gpu_models and gpu_model in row.gpu_models.split(","):
                found.append(row)
        book._sources[key] = sorted(found, key=_order)
    return book._sources[key]


def grant_value(book: Book, owner_id: str, gpu_model: str, price_micros: int) -> int:
    """What the owner's usable grant hours for `gpu_model` pay at `price_micros`, in micros."""
    return sum(
        card_time_value(max(ledger.balance_of(r), 0), price_micros)
        for r in grant_sources(book, owner_id, gpu_model)
    )


def spend_grants(book: Book, row: Rated, amount: int, id_base: str) -> int:
    """Pay up to `amount` micros of the instance's usage with grant hours, at its current price:
    per grant account, card time moves to `platform:grant_hours_used` and the money it is worth
    from `platform:grants` to revenue (transfers `<id_base>:grant:<account id>` and
    `...:grantpay:...`). Returns the micros paid."""
    left = amount
    for source in grant_sources(book, row.owner_id, paid_as(row)):
        if left <= 0:
            break
        take = min(left, card_time_value(max(ledger.balance_of(source), 0), row.price_micros))
        if take <= 0:
            continue
        book.transfer(
            f"{id_base}:grant:{source.id}",
            source.key,
            ledger.platform_key("grant_hours_used"),
            card_time_for(take, row.price_micros),
            "grant_use",
            row.id,
        )
        book.transfer(
            f"{id_base}:grantpay:{source.id}",
            ledger.platform_key("grants"),
            ledger.platform_key("revenue"),
            take,
            "grant_use",
            row.id,
        )
        left -= take
    return amount - left


def spendable(book: Book, owner_id: str, gpu_model: str) -> int:
    """What the owner can set aside for `gpu_model` now (cash counted only when positive)."""
    return sum(max(ledger.balance_of(r), 0) for r in sources(book, owner_id, gpu_model))


def draw(
    book: Book,
    owner_id: str,
    gpu_model: str,
    amount: int,
    dest: str,
    id_base: str,
    kind: str,
    ref: str,
    overdraft: bool,
) -> None:
    """Move `amount` to `dest` from the owner's sources in spending order, one transfer per source
    (`<id_base>:<account id>`). Without `overdraft` it raises InsufficientBalance, moving nothing,
    when the sources do not cover it; with it, cash takes whatever the credits did not."""
    if amount <= 0:
        return
    order = sources(book, owner_id, gpu_model)
    if not overdraft and spendable(book, owner_id, gpu_model) < amount:
        have = Money(spendable(book, owner_id, gpu_model), book.row(dest).currency)
        need = Money(amount, have.currency)
        raise InsufficientBalance(
            f"available balance {have.floor_str()} {have.currency} does not cover "
            f"{need.format()} {have.currency}",
            needed=need.format(),
            available=have.floor_str(),
        )
    left = amount
    for row in order:
        take = left if row.kind == CASH and overdraft else min(left, max(ledger.balance_of(row), 0))
        if take > 0:
            book.transfer(f"{id_base}:{row.id}", row.key, dest, take, kind, ref)
            left -= take
        if left == 0:
            return
    if left:
        raise InsufficientBalance("no cash account to draw from")


def hold_balance(book: Book, row: Rated) -> int:
    hold = book.accounts.get(ledger.hold_key(row.owner_id, row.id))
    return ledger.balance_of(hold) if hold is not None else 0


def held_for(session: Session, row: InstanceRow) -> int:
    """What is left of the instance's hold (a display; no lock)."""
    hold = store.get_account(session, ledger.hold_key(row.owner_id, row.id))
    return ledger.balance_of(hold) if hold is not None else 0


def open_wallet(
    session: Session,
    now: datetime,
    owners: Sequence[str],
    platform: Sequence[str] = (),
    holds: Sequence[str] | None = None,
) -> Book:
    """Lock every account of `owners` (cash, credits, holds), the grant-hours accounts of their
    teams (with the platform accounts grant use posts to), plus `platform` accounts. `holds`:
    of the owners' hold accounts (one per instance they ever launched) only these keys."""
    shared = store.active_grant_accounts(session, owners, now) if owners else {}
    keys = [ledger.platform_key(k) for k in platform]
    if shared:
        keys += sorted({k for ks in shared.values() for k in ks})
        keys += [ledger.platform_key(k) for k in ("grants", "grant_hours_used", "revenue")]
    if holds is None:
        book = ledger.open_book(session, now, keys, owners)
    else:
        rows = store.lock_accounts(session, [*keys, *holds], owners, holds=False)
        book = Book(session, now, {r["key"]: Account(**r) for r in rows})
    book.shared = shared
    return book


def place_hold(
    session: Session,
    row: InstanceRow,
    amount: Money,
    now: datetime,
    usage_price: int = 0,
    new: bool = False,
) -> int:
    """Set `amount` aside for the instance, from its owner's sources in spending order, into the
    instance's hold account. Raises InsufficientBalance (nothing moved) when they cannot cover
    it. Check and transfers happen on rows locked in this transaction. `usage_price`: the hold is
    for on-demand usage at this price per card-hour, which grant hours pay first, so it is less
    what the owner's usable grant hours are worth at that price (grant hours are not set
    aside: instances of a team share them, and once they run out the charges fall to the hold,
    credits and cash). `new`: the instance was created in this transaction (its hold account is
    inserted without a look-up). Returns what the hold then holds (`held_for`'s answer)."""
    if new:
        ledger.open_hold_account(session, row.owner_id, row.id, amount.currency, now)
    else:
        ledger.ensure_hold_account(session, row.owner_id, row.id, amount.currency, now)
    key = ledger.hold_key(row.owner_id, row.id)
    book = open_wallet(session, now, [row.owner_id], holds=[key])  # not the owner's other holds
    hold = book.row(key)
    need = amount.micros
    if usage_price:
        need = max(need - grant_value(book, row.owner_id, paid_as(row), usage_price), 0)
    draw(
        book,
        row.owner_id,
        paid_as(row),
        need,
        hold.key,
        f"hold:{row.id}:{hold.credits_posted}",
        "hold",
        row.id,
        overdraft=False,
    )
    book.flush()
    return book.balance(key)


def release_hold(session: Session, row: InstanceRow, now: datetime) -> int:
    """Give back what is left of the instance's hold to where it came from. A hold is funded once
    per run (launch or start) and emptied when the run ends, so what is left came from the
    latest funding; what was spent from it counts as spent from its first sources (credits), so
    the rest goes back to the last ones (cash first, then credits in reverse spending order).
    Returns the amount released."""
    key = ledger.hold_key(row.owner_id, row.id)
    book = open_wallet(session, now, [row.owner_id], holds=[key])
    hold = book.accounts.get(key)
    if hold is None or ledger.balance_of(hold) <= 0:
        return 0
    left = ledger.balance_of(hold)
    released = left
    by_id = {r.id: r for r in book.accounts.values()}
    contributed = {
        aid: amount for aid, amount in latest_funding(session, hold.id).items() if aid in by_id
    }
    givers = sorted(
        (by_id[aid] for aid in contributed),
        key=lambda r: (r.kind == CASH, _order(r)),
        reverse=True,
    )
    for giver in givers:
        back = min(left, contributed[giver.id])
        if back > 0:
            book.transfer(
                f"release:{row.id}:{hold.debits_posted}:{giver.id}",
                key,
                giver.key,
                back,
                "hold_release",
                row.id,
            )
            left -= back
    if left:  # contributions always cover the balance; keep the ledger whole regardless
        book.transfer(
            f"release:{row.id}:{hold.debits_posted}:cash",
            key,
            ledger.user_key(row.owner_id, CASH),
            left,
            "hold_release",
            row.id,
        )
    book.flush()
    return released


def latest_funding(session: Session, hold_id: int) -> dict[int, int]:
    """What each source put into the hold in its latest funding (transfer ids
    `hold:<instance>:<hold credits before>:<source>`, so the latest has the largest number)."""
    fundings = store.hold_fundings(session, hold_id)
    if not fundings:
        return {}
    latest = max(int(tid.split(":")[2]) for tid, _, _ in fundings)
    amounts: dict[int, int] = {}
    for tid, source, amount in fundings:
        if int(tid.split(":")[2]) == latest:
            amounts[source] = amounts.get(source, 0) + amount
    return amounts


def charge(book: Book, row: Rated, amount: int, id_base: str, kind: str) -> None:
    """Charge `amount` of the instance's usage to revenue: its team's grant hours first, then its
    hold, then its owner's sources in spending order, cash taking what is left even below zero
    (usage already ran)."""
    revenue = ledger.platform_key("revenue")
    model = paid_as(row)
    amount -= spend_grants(book, row, amount, id_base)
    from_hold = min(amount, max(hold_balance(book, row), 0))
    if from_hold:
        book.transfer(
            f"{id_base}:hold",
            ledger.hold_key(row.owner_id, row.id),
            revenue,
            from_hold,
            kind,
            row.id,
        )
    draw(book, row.owner_id, model, amount - from_hold, revenue, id_base, kind, row.id, True)


@dataclass(frozen=True)
class CreditView:
    key: str
    kind: str
    balance: Money
    expires_at: datetime | None
    gpu_models: tuple[str, ...]
    expired: bool


@dataclass(frozen=True)
class Balance:
    currency: str
    cash: Money
    credits: list[CreditView]
    held: Money  # set aside for instances (launch holds)

    @property
    def usable_credit(self) -> Money:
        return sum((c.balance for c in self.credits if not c.expired), Money.zero(self.currency))

    @property
    def available(self) -> Money:
        """Cash plus unexpired credits: what new holds and charges can draw on (whatever model)."""
        return self.cash + self.usable_credit

    def credit_of(self, kind: str) -> Money:
        return sum(
            (c.balance for c in self.credits if c.kind == kind and not c.expired),
            Money.zero(self.currency),
        )


def balance(session: Session, user_id: str, currency: str, now: datetime) -> Balance:
    """The owner's balances, read without locks (a display)."""
    rows = store.owned_accounts(session, user_id)
    cash = sum((ledger.balance_of(r) for r in rows if r.kind == CASH), 0)
    held = sum((ledger.balance_of(r) for r in rows if r.kind == HOLD), 0)
    credits = [
        CreditView(
            key=r.key,
            kind=r.kind,
            balance=Money(ledger.balance_of(r), currency),
            expires_at=as_utc(r.expires_at) if r.expires_at else None,
            gpu_models=tuple(r.gpu_models.split(",")) if r.gpu_models else (),
            expired=r.expires_at is not None and as_utc(r.expires_at) <= now,
        )
        for r in rows
        if r.kind in CREDIT_KINDS
    ]
    return Balance(currency, Money(cash, currency), credits, Money(held, currency))
