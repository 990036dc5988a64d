"""Grants of card-hours to a team: issued into the ledger, spent by members' usage, expired.

A grant is card time, not money: its ledger account (`grant:<grant id>`, unit `MGS`,
milli-GPU-seconds; one card-hour = 3,600,000) holds the hours, usable by every member of the
team for the grant's GPU models from `valid_from` until `expires_at`. Each usage charge of a
member's instance of such a model is paid from the grant first (`wallet.spend_grants`): the card
time it is worth at the instance's price moves to `platform:grant_hours_used` and that money from
`platform:grants` to revenue, so the instance's bill is its usage × rate as always and the
sponsorship shows as the platform's expense. What is left at `expires_at` goes back to
`platform:grant_hours_pool` (`credit_accounts.expire_credits`). Every step is a ledger
transfer, so the usage report below is read from the ledger.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import Conflict, InvalidInput, NotFound
from cardhour.core.money import CARD_TIME_UNIT, MILLI_GPU_SECONDS_PER_CARD_HOUR, Money
from cardhour.core.proposals import MAX_CARD_HOURS
from cardhour.db.models import GrantRow
from cardhour.services.billing import ledger
from cardhour.store.accounts import users as user_store
from cardhour.store.grants import hours as store

#: The window the burn rate is measured over.
BURN_WINDOW = timedelta(days=7)


def hours(milli_gpu_seconds: int) -> str:
    """Card-hours as a decimal string with three places, rounded down."""
    value = Decimal(milli_gpu_seconds) / MILLI_GPU_SECONDS_PER_CARD_HOUR
    return str(value.quantize(Decimal("0.001"), rounding=ROUND_FLOOR))


def _check_terms(
    card_hours: int, gpu_models: tuple[str, ...], valid_from: datetime, expires_at: datetime
) -> None:
    if isinstance(card_hours, bool) or not 1 <= card_hours <= MAX_CARD_HOURS:
        raise InvalidInput(f"a grant is 1 to {MAX_CARD_HOURS:,} card-hours, not {card_hours:,}")
    if not gpu_models:
        raise InvalidInput("a grant names at least one GPU model")
    if expires_at <= valid_from:
        raise InvalidInput("a grant's period must end after it starts")


def issue(
    session: Session,
    *,
    grant_id: str,
    proposal_id: str | None,
    title: str,
    member_ids: list[str],
    card_hours: int,
    gpu_models: tuple[str, ...],
    valid_from: datetime,
    expires_at: datetime,
    now: datetime,
) -> GrantRow:
    """Open the grant's account and fund it with `card_hours` from `platform:grant_hours_pool`,
    in the caller's transaction. Idempotent on `grant_id`: the same terms return the grant,
    other terms are a Conflict."""
    valid_from, expires_at = as_utc(valid_from), as_utc(expires_at)
    models = tuple(sorted(set(gpu_models)))
    _check_terms(card_hours, models, valid_from, expires_at)
    members = sorted(set(member_ids))
    if not members:
        raise InvalidInput("a grant has at least one member")
    existing = store.get(session, grant_id)
    if existing is not None:
        same = (
            existing.card_hours,
            existing.gpu_models,
            as_utc(existing.valid_from),
            as_utc(existing.expires_at),
            store.member_ids(session, grant_id),
        ) == (card_hours, ",".join(models), valid_from, expires_at, members)
        if not same:
            raise Conflict(f"grant {grant_id} exists with different terms")
        return existing  # a retry after the period ended still gets the grant it issued
    if expires_at <= now:
        raise InvalidInput("a grant cannot expire before it is issued")
    for user_id in members:
        if user_store.get_user(session, user_id) is None:
            raise NotFound(f"no user {user_id}")
    key = ledger.grant_hours_key(grant_id)
    row = store.add(
        session,
        GrantRow(
            id=grant_id,
            proposal_id=proposal_id,
            title=title[:200],
            account_key=key,
            card_hours=card_hours,
            gpu_models=",".join(models),
            valid_from=valid_from,
            expires_at=expires_at,
            created_at=now,
        ),
        members,
    )
    for kind in ledger.PLATFORM_CARD_TIME_KINDS:
        ledger.ensure_account(session, ledger.platform_key(kind), kind, CARD_TIME_UNIT)
    ledger.ensure_account(
        session,
        key,
        ledger.GRANT_HOURS,
        CARD_TIME_UNIT,
        created_at=now,
        valid_from=valid_from,
        expires_at=expires_at,
        gpu_models=",".join(models),
        priority=0,
    )
    ledger.post(
        session,
        f"grant:{grant_id}",
        ledger.platform_key("grant_hours_pool"),
        key,
        Money(card_hours * MILLI_GPU_SECONDS_PER_CARD_HOUR, CARD_TIME_UNIT),
        "grant_issue",
        now,
        ref=proposal_id,
    )
    return row


def grants_of(session: Session, user_id: str) -> list[GrantRow]:
    """The grants whose team the user is a member of, oldest first."""
    return store.of_member(session, user_id)


@dataclass(frozen=True)
class UsageLine:
    key: str  # instance id, or member id
    name: str  # instance name, or member email
    card_hours: str
    milli_gpu_seconds: int


@dataclass(frozen=True)
class GrantReport:
    grant_id: str
    proposal_id: str | None
    title: str
    gpu_models: list[str]
    valid_from: datetime
    expires_at: datetime
    status: str  # "upcoming" | "active" | "expired"
    members: list[str]  # emails
    granted_card_hours: str
    used_card_hours: str
    expired_card_hours: str
    remaining_card_hours: str
    burn_rate_card_hours_per_day: str  # over the last 7 days (or since valid_from)
    runs_out_at: datetime | None  # at that burn rate, if before expiry
    used_milli_gpu_seconds: int
    expired_milli_gpu_seconds: int
    remaining_milli_gpu_seconds: int
    by_instance: list[UsageLine] = field(default_factory=list)
    by_member: list[UsageLine] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("valid_from", "expires_at", "runs_out_at"):
            value = data[name]
            data[name] = value.isoformat() if value is not None else None
        return data


def _status(row: GrantRow, now: datetime) -> str:
    if now < as_utc(row.valid_from):
        return "upcoming"
    return "active" if now < as_utc(row.expires_at) else "expired"


def report(session: Session, grant_id: str, now: datetime) -> GrantReport:
    """Hours used by instance and by member, expired, remaining and the burn rate, from the
    grant account's transfers. NotFound for an unknown grant (the caller checks who may see it)."""
    row = store.get(session, grant_id)
    if row is None:
        raise NotFound(f"no grant {grant_id}")
    account = store.account(session, row.account_key)
    assert account is not None, f"grant {grant_id} has no ledger account"
    used = expired = recent = 0
    by_instance: dict[str, list[Any]] = {}
    by_member: dict[str, int] = {}
    window_start = max(now - BURN_WINDOW, as_utc(row.valid_from))
    for kind, instance_id, name, owner_id, amount, at in store.spending(session, account.id):
        if kind == "credit_expiry":
            expired += amount
            continue
        used += amount
        if as_utc(at) > window_start:
            recent += amount
        by_instance.setdefault(instance_id, [name, 0])[1] += amount
        by_member[owner_id] = by_member.get(owner_id, 0) + amount
    emails = {u: _email(session, u) for u in {*by_member, *store.member_ids(session, grant_id)}}
    remaining = ledger.balance_of(account)
    window = min(now, as_utc(row.expires_at)) - window_start
    per_day = recent * 86_400 // max(int(window.total_seconds()), 1) if recent else 0
    runs_out = None
    if per_day and remaining and _status(row, now) == "active":
        at = now + timedelta(seconds=remaining * 86_400 // per_day)
        runs_out = at if at < as_utc(row.expires_at) else None
    return GrantReport(
        grant_id=row.id,
        proposal_id=row.proposal_id,
        title=row.title,
        gpu_models=row.gpu_models.split(","),
        valid_from=as_utc(row.valid_from),
        expires_at=as_utc(row.expires_at),
        status=_status(row, now),
        members=sorted(emails[u] for u in store.member_ids(session, grant_id)),
        granted_card_hours=hours(row.card_hours * MILLI_GPU_SECONDS_PER_CARD_HOUR),
        used_card_hours=hours(used),
        expired_card_hours=hours(expired),
        remaining_card_hours=hours(remaining),
        burn_rate_card_hours_per_day=hours(per_day),
        runs_out_at=runs_out,
        used_milli_gpu_seconds=used,
        expired_milli_gpu_seconds=expired,
        remaining_milli_gpu_seconds=remaining,
        by_instance=[
            UsageLine(iid, name, hours(mgs), mgs)
            for iid, (name, mgs) in sorted(by_instance.items(), key=lambda kv: -kv[1][1])
        ],
        by_member=[
            UsageLine(uid, emails[uid], hours(mgs), mgs)
            for uid, mgs in sorted(by_member.items(), key=lambda kv: -kv[1])
        ],
    )


def _email(session: Session, user_id: str) -> str:
    user = user_store.get_user(session, user_id)
    return user.email if user is not None else user_id


@dataclass(frozen=True)
class Dashboard:
    """The operator's view: hours granted, used, expired and still to use, over all grants."""

    grants: int
    active: int
    granted_card_hours: str
    used_card_hours: str
    expired_card_hours: str
    remaining_card_hours: str
    lines: list[GrantReport]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lines"] = [line.to_dict() for line in self.lines]
        return data


def dashboard(session: Session, now: datetime) -> Dashboard:
    reports = [report(session, row.id, now) for row in store.list_all(session)]

    granted = sum(r.card_hours for r in store.list_all(session)) * MILLI_GPU_SECONDS_PER_CARD_HOUR
    return Dashboard(
        grants=len(reports),
        active=sum(r.status == "active" for r in reports),
        granted_card_hours=hours(granted),
        used_card_hours=hours(sum(r.used_milli_gpu_seconds for r in reports)),
        expired_card_hours=hours(sum(r.expired_milli_gpu_seconds for r in reports)),
        remaining_card_hours=hours(sum(r.remaining_milli_gpu_seconds for r in reports)),
        lines=reports,
    )
