"""The billing pages' data: the balance in the header, the balance broken down (cash, each
credit, held), a month's statement as table rows, and the months a user can pick (from their
sign-up to now).

Figures come from `services.billing.wallet` and `services.billing.statements`, the same as the
API's `/balance` and `/statements/{month}`; amounts are shown as `Money.display()` (exact, two
decimals at least), never rounded through floats.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput
from cardhour.db.models import UserRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import statements, wallet
from cardhour.services.billing.statements import Statement
from cardhour.services.grants import hours as grant_hours

MAX_MONTHS = 24  # in the picker; older months stay reachable by URL


def months(user: UserRow, now: datetime) -> list[str]:
    """From the current month back to the sign-up month (at most MAX_MONTHS), newest first."""
    first = statements.month_of(as_utc(user.created_at))
    out = [statements.month_of(now)]
    while out[-1] > first and len(out) < MAX_MONTHS:
        out.append(statements.previous_month(out[-1]))
    return out


def balance_view(
    session: Session, platform: Platform, user_id: str, now: datetime
) -> dict[str, Any]:
    """The header's balance (what is available, floored) and the low-balance banner's state."""
    currency = platform.catalog.currency
    user = accounts.get_user(session, user_id)
    return {
        "balance": wallet.balance(session, user_id, currency, now).available.floor_str(),
        "currency": currency,
        "low_balance_since": user.low_balance_since if user else None,
    }


def balance_rows(session: Session, user_id: str, currency: str, now: datetime) -> dict[str, Any]:
    bal = wallet.balance(session, user_id, currency, now)
    credits = [
        {
            "kind": c.kind.replace("_", " "),
            "balance": c.balance.display(),
            "expires_at": f"{c.expires_at:%Y-%m-%d %H:%M} UTC" if c.expires_at else "never",
            "models": ", ".join(c.gpu_models) or "any GPU",
        }
        for c in bal.credits
        if not c.expired and c.balance.micros > 0
    ]
    return {
        "available": bal.available.display(),
        "cash": bal.cash.display(),
        "credits": credits,
        "held": bal.held.display(),
    }


def statement_rows(st: Statement) -> dict[str, Any]:
    """What `_statement.html` shows."""
    m = st.movements
    movements = [("Top-ups", m.top_ups)]
    movements += [(f"{k.replace('_', ' ')} granted", v) for k, v in m.credits_granted.items()]
    movements += [(f"{k.replace('_', ' ')} expired", v) for k, v in m.credits_expired.items()]
    movements += [
        ("Usage charged", m.usage_charged),
        ("Plans charged", m.plan_charged),
        ("Plan refunds", m.plan_refunds),
        ("Volumes charged", m.storage_charged),
        ("Other", m.other),
    ]
    return {
        "month": st.month,
        "complete": st.complete,
        "period_end": f"{st.period_end:%Y-%m-%d %H:%M:%S} UTC",
        "usage_lines": [
            {
                "name": u.instance_name,
                "gpus": f"{u.gpu_count} × {u.gpu_model}" if u.gpu_count else "no GPU (hours)",
                "where": u.data_centre or "—",
                "card_hours": statements.card_hours(u.card_seconds),
                "card_seconds": u.card_seconds,
                "rate": u.price.display(),
                "amount": u.amount.display(),
                "running": u.running,
            }
            for u in st.usage_lines
        ],
        "plan_lines": [
            {
                "name": p.instance_name,
                "gpus": f"{p.gpu_count} × {p.gpu_model}",
                "what": "refund" if p.kind == "plan_refund" else "30 days prepaid",
                "posted": f"{p.posted_at:%Y-%m-%d %H:%M} UTC",
                "amount": p.amount.display(),
            }
            for p in st.plan_lines
        ],
        "storage_lines": [
            {
                "name": v.volume_name,
                "size": f"{v.size_gb} GiB",
                "where": v.data_centre,
                "gb_hours": statements.card_hours(v.gb_seconds),
                "rate": v.price.exact_str(),
                "amount": v.amount.display(),
                "kept": v.kept,
            }
            for v in st.storage_lines
        ],
        "usage_total": st.usage_total.display(),
        "plan_total": st.plan_total.display(),
        "storage_total": st.storage_total.display(),
        "total": st.total.display(),
        "paid_from": [(k.replace("_", " "), v.display()) for k, v in st.paid_from.items()],
        "charged": st.charged.display(),
        "paid_by_grants": st.paid_by_grants.display()
        if st.paid_by_grants is not None and st.paid_by_grants.micros
        else None,
        "grant_card_hours": grant_hours.hours(st.grant_milli_gpu_seconds),
        "opening": st.opening.total.display(),
        "movements": [(label, v.display()) for label, v in movements if v.micros],
        "closing": st.closing.total.display(),
        "closing_parts": [
            ("cash", st.closing.cash.display()),
            ("credits", st.closing.credits.display()),
            ("held for instances", st.closing.held.display()),
        ],
    }


def statement_view(
    session: Session, user: UserRow, month: str | None, currency: str, now: datetime
) -> dict[str, Any]:
    """The statement of `month` (default: this one) and the picker; `statement_error` instead
    for a malformed month or one to come. Run it in a transaction that reads one snapshot
    (`context.signed_in(..., snapshot=True)`)."""
    chosen = (month or "").strip() or statements.month_of(now)
    ctx: dict[str, Any] = {"months": months(user, now), "chosen": chosen}
    try:
        st = statements.statement(session, user.id, chosen, now, currency)
    except InvalidInput as exc:
        return {**ctx, "statement_error": exc.message}
    return {**ctx, **statement_rows(st), "chosen": st.month}
