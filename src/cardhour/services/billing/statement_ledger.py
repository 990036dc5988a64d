"""The ledger side of a monthly statement: balances at a moment, the movements posted in the
month, plan lines, and what paid the charges (services/statements.py has the whole contract).

Paid from: each `usage` or `plan` transfer counts against the account it came from; what an
instance's hold pays counts against the accounts that funded the hold, replayed in the wallet's
spending order (credits by priority, soonest expiry, oldest; cash last), and a release gives
back from the other end (cash first), the rule `wallet.release_hold` documents.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.db.models import InstanceRow, LedgerAccountRow, LedgerTransferRow
from cardhour.services.billing.ledger import CASH, CREDIT_KINDS, HOLD
from cardhour.store.billing import statements as store

_FAR = datetime.max.replace(tzinfo=UTC)
PLAN, PLAN_REFUND, USAGE = "plan", "plan_refund", "usage"
STORAGE = "storage"  # volumes kept (`services.storage.charges`)
PAID_FROM_ORDER = (*CREDIT_KINDS, CASH)


@dataclass(frozen=True)
class PlanLine:
    """A monthly plan's up-front charge (positive) or refund (negative), as posted."""

    instance_id: str
    instance_name: str
    gpu_model: str
    gpu_count: int
    kind: str  # "plan" | "plan_refund"
    amount: Money
    posted_at: datetime


@dataclass(frozen=True)
class Balances:
    cash: Money
    credits: Money
    held: Money  # set aside for instances (holds)

    @property
    def total(self) -> Money:
        return self.cash + self.credits + self.held


@dataclass(frozen=True)
class Movements:
    """Posted in the month, signed by their effect on the balance's total."""

    top_ups: Money
    credits_granted: dict[str, Money]  # per credit kind
    credits_expired: dict[str, Money]  # per credit kind, ≤ 0
    usage_charged: Money  # ≤ 0
    plan_charged: Money  # ≤ 0
    plan_refunds: Money
    other: Money
    storage_charged: Money  # ≤ 0

    def items(self) -> list[tuple[str, Money]]:
        """(name, amount) for every movement; they sum to closing − opening."""
        rows = [("top_ups", self.top_ups)]
        rows += [(f"credits_granted:{k}", v) for k, v in self.credits_granted.items()]
        rows += [(f"credits_expired:{k}", v) for k, v in self.credits_expired.items()]
        rows += [
            ("usage_charged", self.usage_charged),
            ("plan_charged", self.plan_charged),
            ("plan_refunds", self.plan_refunds),
            ("storage_charged", self.storage_charged),
            ("other", self.other),
        ]
        return rows

    @property
    def total(self) -> Money:
        amounts = [amount for _, amount in self.items()]
        return sum(amounts[1:], amounts[0])


def _category(account: LedgerAccountRow) -> str:
    if account.kind == HOLD:
        return "held"
    return "credits" if account.kind in CREDIT_KINDS else "cash"


def balances(
    session: Session, accounts: dict[int, LedgerAccountRow], when: datetime, currency: str
) -> Balances:
    parts = {"cash": 0, "credits": 0, "held": 0}
    for aid, amount in store.balances_before(session, list(accounts), when).items():
        parts[_category(accounts[aid])] += amount
    return Balances(*(Money(parts[k], currency) for k in ("cash", "credits", "held")))


def _effect(t: LedgerTransferRow, accounts: dict[int, LedgerAccountRow]) -> int:
    """What the transfer did to the user's total (0 between two of their own accounts)."""
    return (t.amount if t.credit_account_id in accounts else 0) - (
        t.amount if t.debit_account_id in accounts else 0
    )


def movements(
    transfers: list[LedgerTransferRow], accounts: dict[int, LedgerAccountRow], currency: str
) -> Movements:
    sums: dict[str, int] = defaultdict(int)
    granted: dict[str, int] = defaultdict(int)
    expired: dict[str, int] = defaultdict(int)
    for t in transfers:
        effect = _effect(t, accounts)
        if effect == 0:
            continue
        if t.kind in CREDIT_KINDS:
            granted[t.kind] += effect
        elif t.kind == "credit_expiry" and t.debit_account_id in accounts:
            expired[accounts[t.debit_account_id].kind] += effect
        elif t.kind in ("top_up", USAGE, PLAN, PLAN_REFUND, STORAGE):
            sums[t.kind] += effect
        else:
            sums["other"] += effect

    def money(value: int) -> Money:
        return Money(value, currency)

    return Movements(
        top_ups=money(sums["top_up"]),
        credits_granted={k: money(granted[k]) for k in CREDIT_KINDS if k in granted},
        credits_expired={k: money(expired[k]) for k in CREDIT_KINDS if k in expired},
        usage_charged=money(sums[USAGE]),
        plan_charged=money(sums[PLAN]),
        plan_refunds=money(sums[PLAN_REFUND]),
        other=money(sums["other"]),
        storage_charged=money(sums[STORAGE]),
    )


def plan_lines(
    transfers: list[LedgerTransferRow],
    accounts: dict[int, LedgerAccountRow],
    instances: dict[str, InstanceRow],
    currency: str,
) -> list[PlanLine]:
    groups: dict[tuple[str, str], list[LedgerTransferRow]] = defaultdict(list)
    for t in transfers:
        if t.kind in (PLAN, PLAN_REFUND) and _effect(t, accounts) != 0:
            groups[(t.ref or "", t.kind)].append(t)
    lines = []
    for (instance_id, kind), group in groups.items():
        row = instances.get(instance_id)
        lines.append(
            PlanLine(
                instance_id=instance_id,
                instance_name=row.name if row is not None else instance_id,
                gpu_model=row.gpu_model if row is not None else "",
                gpu_count=row.gpu_count if row is not None else 0,
                kind=kind,
                amount=Money(-sum(_effect(t, accounts) for t in group), currency),
                posted_at=min(as_utc(t.created_at) for t in group),
            )
        )
    return sorted(lines, key=lambda x: (x.posted_at, x.instance_name, x.kind))


def _spending_order(account: LedgerAccountRow | None) -> tuple[bool, int, datetime, datetime, int]:
    """The wallet's order: credits by priority, soonest expiry, oldest; cash (and anything
    unknown) last."""
    if account is None:
        return (True, 1 << 62, _FAR, _FAR, 0)
    expires = as_utc(account.expires_at) if account.expires_at is not None else _FAR
    created = as_utc(account.created_at) if account.created_at is not None else _FAR
    return (account.kind == CASH, account.priority, expires, created, account.id)


def paid_from(
    session: Session,
    transfers: list[LedgerTransferRow],
    accounts: dict[int, LedgerAccountRow],
    start: datetime,
    end: datetime,
    currency: str,
) -> dict[str, Money]:
    paid: dict[str, int] = defaultdict(int)
    holds: set[int] = set()
    for t in transfers:
        if t.kind not in (USAGE, PLAN, STORAGE) or t.debit_account_id not in accounts:
            continue
        source = accounts[t.debit_account_id]
        if source.kind == HOLD:
            holds.add(source.id)
        else:
            paid[source.kind if source.kind in CREDIT_KINDS else CASH] += t.amount
    for kind, amount in _hold_captures(session, holds, accounts, start, end).items():
        paid[kind] += amount
    return {k: Money(paid[k], currency) for k in PAID_FROM_ORDER if paid.get(k)}


def _hold_captures(
    session: Session,
    holds: set[int],
    accounts: dict[int, LedgerAccountRow],
    start: datetime,
    end: datetime,
) -> dict[str, int]:
    """What the charges from `holds` posted in [start, end) took from each kind of source."""
    if not holds:
        return {}
    history: dict[int, list[LedgerTransferRow]] = defaultdict(list)
    for t in store.transfers_before(session, sorted(holds), end):
        hold = t.credit_account_id if t.credit_account_id in holds else t.debit_account_id
        history[hold].append(t)
    taken: dict[str, int] = defaultdict(int)
    for hold_id, transfers in history.items():
        for kind, amount in _replay_hold(hold_id, transfers, accounts, start).items():
            taken[kind] += amount
    return taken


def _replay_hold(
    hold_id: int,
    transfers: list[LedgerTransferRow],
    accounts: dict[int, LedgerAccountRow],
    start: datetime,
) -> dict[str, int]:
    """Replay one hold account: money put in is kept per source; a charge takes from the
    sources in spending order; a release gives back from the other end (cash first).

    Events are ordered by the hold's own totals, not by time alone (a stop and a start can post
    at the same instant): a placement (all its transfers share one instant) happens when
    everything put in before it has been charged or released, so it sits at position
    "debits so far == credits before it"; charges and releases sit at their running debit total
    (in time order, a charge before a release of the same instant)."""
    placements: dict[datetime, list[LedgerTransferRow]] = defaultdict(list)
    debits = []
    for t in transfers:
        if t.credit_account_id == hold_id:
            placements[as_utc(t.created_at)].append(t)
        else:
            debits.append(t)
    events: list[tuple[tuple[int, int], list[LedgerTransferRow]]] = []
    position = 0
    for at in sorted(placements):
        events.append(((position, 0), placements[at]))
        position += sum(t.amount for t in placements[at])
    position = 0
    for t in sorted(
        debits, key=lambda t: (as_utc(t.created_at), t.credit_account_id in accounts, t.id)
    ):
        events.append(((position, 1), [t]))
        position += t.amount
    kept: dict[int, int] = {}  # source account id → what is left of it in the hold
    taken: dict[str, int] = defaultdict(int)
    for (_, out), group in sorted(events, key=lambda e: e[0]):
        if not out:
            for t in group:
                kept[t.debit_account_id] = kept.get(t.debit_account_id, 0) + t.amount
            continue
        [t] = group
        charge = t.credit_account_id not in accounts
        order = sorted(kept, key=lambda aid: (_spending_order(accounts.get(aid)), aid))
        left = t.amount
        for aid in order if charge else reversed(order):
            take = min(left, kept[aid])
            kept[aid] -= take
            left -= take
            if charge and take and as_utc(t.created_at) >= start:
                kind = accounts[aid].kind if aid in accounts else CASH
                taken[kind if kind in CREDIT_KINDS else CASH] += take
        if charge and left and as_utc(t.created_at) >= start:
            taken[CASH] += left  # a hold never pays more than was put in; kept whole anyway
    return taken
