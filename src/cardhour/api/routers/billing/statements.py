"""Monthly statements of the caller's account, as JSON or CSV."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.schemas.statements import (
    BalancesRead,
    MovementsRead,
    PlanLineRead,
    StatementRead,
    StorageLineRead,
    UsageLineRead,
)
from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money
from cardhour.services.billing import statements
from cardhour.services.billing.statements import Balances, Statement
from cardhour.services.grants import hours as grant_hours

router = APIRouter(tags=["billing"])
CSV_TYPE = "text/csv"

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {CSV_TYPE: {"schema": {"type": "string"}}},
        "description": "JSON, or CSV with `?format=csv` or `Accept: text/csv`.",
    },
    401: {"model": schemas.ErrorRead, "description": "no or a bad API key"},
    422: {"model": schemas.ErrorRead, "description": "not YYYY-MM, or a month to come"},
}


@router.get("/statements/{month}", response_model=StatementRead, responses=_RESPONSES)
def get_statement(
    month: str,
    request: Request,
    format: str | None = Query(default=None, description="json (default) or csv."),
    ctx: Ctx = Depends(get_ctx),
) -> Any:
    """The caller's statement for `month` (YYYY-MM, UTC; `current`: the server's month now):
    usage lines per instance and price, plan lines, how the charges were paid, and the balance
    at the month's start and end (now, for the month in progress). Usage lines are usage *in*
    the month; ledger movements are what was *posted* in it. Another account's usage never
    appears."""
    wanted = (format or "").strip().lower()
    if wanted not in ("", "json", "csv"):
        raise InvalidInput(f"format: {wanted[:20]!r} is not json or csv")
    as_csv = wanted == "csv" or (not wanted and CSV_TYPE in request.headers.get("accept", ""))
    with ctx.user_tx() as (_, user):
        user_id = user.id
    if month.strip().lower() == "current":
        month = statements.month_of(ctx.now)
    with ctx.tx() as session:
        statements.read_one_snapshot(session)
        st = statements.statement(session, user_id, month, ctx.now, ctx.platform.catalog.currency)
    if as_csv:
        return Response(
            statements.to_csv(st),
            media_type=f"{CSV_TYPE}; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="cardhour-statement-{st.month}.csv"'
            },
        )
    return statement_read(st)


def _balances(b: Balances) -> BalancesRead:
    return BalancesRead(
        cash=b.cash.exact_str(),
        credits=b.credits.exact_str(),
        held=b.held.exact_str(),
        total=b.total.exact_str(),
    )


def statement_read(st: Statement) -> StatementRead:
    m = st.movements
    return StatementRead(
        month=st.month,
        currency=st.currency,
        period_start=st.period_start,
        period_end=st.period_end,
        complete=st.complete,
        usage_lines=[
            UsageLineRead(
                instance_id=u.instance_id,
                instance_name=u.instance_name,
                gpu_model=u.gpu_model,
                data_centre=u.data_centre,
                gpu_count=u.gpu_count,
                card_seconds=u.card_seconds,
                rate_per_card_hour=u.price.exact_str(),
                amount=u.amount.exact_str(),
                started_at=u.started_at,
                ended_at=u.ended_at,
                running=u.running,
            )
            for u in st.usage_lines
        ],
        plan_lines=[
            PlanLineRead(
                instance_id=p.instance_id,
                instance_name=p.instance_name,
                gpu_model=p.gpu_model,
                gpu_count=p.gpu_count,
                kind=p.kind,
                amount=p.amount.exact_str(),
                posted_at=p.posted_at,
            )
            for p in st.plan_lines
        ],
        storage_lines=[
            StorageLineRead(
                volume_id=v.volume_id,
                volume_name=v.volume_name,
                data_centre=v.data_centre,
                size_gb=v.size_gb,
                gb_seconds=v.gb_seconds,
                rate_per_gb_hour=v.price.exact_str(),
                amount=v.amount.exact_str(),
                started_at=v.started_at,
                ended_at=v.ended_at,
                kept=v.kept,
            )
            for v in st.storage_lines
        ],
        usage_total=st.usage_total.exact_str(),
        plan_total=st.plan_total.exact_str(),
        storage_total=st.storage_total.exact_str(),
        total=st.total.exact_str(),
        charged=st.charged.exact_str(),
        paid_from={k: v.exact_str() for k, v in st.paid_from.items()},
        credits_used=st.credits_used.exact_str(),
        cash_used=st.cash_used.exact_str(),
        paid_by_grants=(st.paid_by_grants or Money.zero(st.currency)).exact_str(),
        grant_card_hours=grant_hours.hours(st.grant_milli_gpu_seconds),
        opening=_balances(st.opening),
        closing=_balances(st.closing),
        movements=MovementsRead(
            top_ups=m.top_ups.exact_str(),
            credits_granted={k: v.exact_str() for k, v in m.credits_granted.items()},
            credits_expired={k: v.exact_str() for k, v in m.credits_expired.items()},
            usage_charged=m.usage_charged.exact_str(),
            plan_charged=m.plan_charged.exact_str(),
            plan_refunds=m.plan_refunds.exact_str(),
            storage_charged=m.storage_charged.exact_str(),
            other=m.other.exact_str(),
            total=m.total.exact_str(),
        ),
        generated_at=st.generated_at,
    )
