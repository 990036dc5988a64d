"""The versioned price book in the database, price changes, and quotes.

- The fleet file's prices are the first version of each (model, data centre) key, effective from
  the epoch; they are copied in at start for keys the database does not have yet. From then on
  operators change prices with `set_price` (effective now or later, never earlier), and each
  change applies to usage after it, running instances included (metering splits the segment).
- A quote promises a per-card-hour price to one user until `valid_until`. A launch that names a
  valid quote is placed at no more than the quoted price (its first placement).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from cardhour.core.catalog import HOURS_PER_MONTH, Catalog
from cardhour.core.clock import as_utc
from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.gpus import validate_gpu_count
from cardhour.core.money import Money, MoneyError
from cardhour.core.pricing import PriceHistory, PriceVersion
from cardhour.core.states import Plan
from cardhour.db.models import InstanceRow, PriceVersionRow, QuoteRow, UserRow
from cardhour.services.ids import new_id
from cardhour.store.billing import prices as store

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
MAX_PRICE = Money.parse("1000000")  # per card-hour


def history(session: Session, catalog: Catalog | None = None) -> PriceHistory:
    """Every version in the database (the catalog gives the monthly discount)."""
    versions = [
        PriceVersion(gpu_model, data_centre or "", Money(micros, currency), as_utc(effective_from))
        for gpu_model, data_centre, micros, currency, effective_from in store.version_columns(
            session
        )
    ]
    discount = catalog.prices.monthly_discount_percent if catalog is not None else 35
    return PriceHistory(versions, discount)


def model_dcs(catalog: Catalog, gpu_model: str) -> list[str]:
    """The data centres that have nodes of `gpu_model`."""
    return sorted({n.data_centre for n in catalog.nodes if n.gpu_model == gpu_model})


def _version(
    gpu_model: str,
    data_centre: str,
    price: Money,
    effective_from: datetime,
    now: datetime,
    source: str,
    by: str | None = None,
) -> PriceVersionRow:
    return PriceVersionRow(
        gpu_model=gpu_model,
        data_centre=data_centre,
        on_demand_micros=price.micros,
        currency=price.currency,
        effective_from=effective_from,
        source=source,
        created_at=now,
        created_by=by,
    )


def seed_from_catalog(session: Session, catalog: Catalog, now: datetime) -> int:
    """Copy the fleet file's prices in for (model, data centre) keys without any version yet."""
    have = {(r.gpu_model, r.data_centre) for r in store.list_versions(session)}
    rows = []
    for model in catalog.gpu_models:
        for dc in model_dcs(catalog, model.id):
            if (model.id, dc) in have:
                continue
            try:
                price = catalog.prices.on_demand(model.id, dc)
            except NotFound:
                continue
            rows.append(_version(model.id, dc, price, EPOCH, now, "fleet_file"))
    store.add_versions(session, rows)
    return len(rows)


def set_price(
    session: Session,
    catalog: Catalog,
    admin: UserRow,
    gpu: str,
    price: str,
    now: datetime,
    data_centre: str | None = None,
    effective_from: datetime | None = None,
) -> list[PriceVersionRow]:
    """A new on-demand price for `gpu` in `data_centre` (default: every one that has it), from
    `effective_from` (default now; never in the past). Returns the versions written."""
    model = catalog.model(gpu)
    try:
        amount = Money.parse(price, catalog.currency)
    except MoneyError as exc:
        raise InvalidInput(f"bad price {price!r}: {exc}") from exc
    if not 0 < amount.micros <= MAX_PRICE.micros:
        raise InvalidInput(f"a price must be above 0 and at most {MAX_PRICE.format()}")
    when = now if effective_from is None else as_utc(effective_from)
    if when < now:
        raise InvalidInput("a price change cannot take effect in the past")
    dcs = model_dcs(catalog, model.id)
    if data_centre is not None:
        if data_centre not in dcs:
            raise InvalidInput(f"{model.id} is not offered in data centre {data_centre!r}")
        dcs = [data_centre]
    rows = [_version(model.id, dc, amount, when, now, "admin", admin.id) for dc in dcs]
    store.add_versions(session, rows)
    return rows


@dataclass(frozen=True)
class PriceLine:
    gpu_model: str
    data_centre: str
    on_demand: Money
    monthly: Money
    effective_from: datetime
    current: bool  # in force now (False: scheduled)


def price_list(session: Session, catalog: Catalog, now: datetime) -> list[PriceLine]:
    """The price in force now per key, plus scheduled changes."""
    prices = history(session, catalog)
    lines = []
    for model, dc in prices.price_keys():
        versions = prices.versions(model, dc)
        current = [v for v in versions if v.effective_from <= now][-1:]
        for v in current + [v for v in versions if v.effective_from > now]:
            lines.append(
                PriceLine(
                    model,
                    dc,
                    v.price,
                    v.price.percent_off(prices.monthly_discount_percent),
                    v.effective_from,
                    v.effective_from <= now,
                )
            )
    return lines


def dearest(prices: PriceHistory, gpu_model: str, now: datetime) -> Money:
    """The one rule for "the dearest data centre": the highest on-demand price of `gpu_model`
    in force at `now` among every data centre with a price for it. An instance is placed only
    where its model has a price (`run_price` needs one), so no run costs more than this: what a
    request that may land anywhere (a launch, a quote, a start) is priced and held at."""
    return prices.highest(gpu_model, prices.data_centres(gpu_model), now)


def launch_price(prices: PriceHistory, gpu_model: str, plan: str, now: datetime) -> Money:
    """Per card-hour for a launch (or a quote) that may land in any data centre with the
    model: the `dearest`, less the monthly discount on the monthly plan."""
    on_demand = dearest(prices, gpu_model, now)
    if plan == Plan.MONTHLY.value:
        return on_demand.percent_off(prices.monthly_discount_percent)
    return on_demand


def run_price(
    prices: PriceHistory, row: InstanceRow, data_centre: str, now: datetime, first: bool
) -> Money:
    """Per card-hour for the instance in `data_centre` from `now` (monthly, before its plan
    starts: the plan's), never above what a valid quote promised at launch when this is its
    `first` placement, nor above the plan price a monthly launch held until its plan starts."""
    if row.plan == Plan.MONTHLY.value and row.plan_until is None:
        price = prices.monthly_at(row.gpu_model, data_centre, now)
    else:
        price = prices.at(row.gpu_model, data_centre, now)
    before_plan = row.plan == Plan.MONTHLY.value and row.plan_until is None
    if row.quoted_price_micros is not None and (first or before_plan):
        price = min(price, Money(row.quoted_price_micros, price.currency))
    return price


def plan_total(per_card_hour: Money, count: int) -> Money:
    """The monthly plan's up-front price: 30 days × 24 h × count cards."""
    return per_card_hour.times(count * HOURS_PER_MONTH)


def create_quote(
    session: Session,
    catalog: Catalog,
    user: UserRow,
    gpu: str,
    count: int,
    plan: str,
    now: datetime,
    validity: timedelta,
) -> QuoteRow:
    model = catalog.model(gpu)
    count = validate_gpu_count(count)
    if plan not in (Plan.ON_DEMAND.value, Plan.MONTHLY.value):
        raise InvalidInput(f"unknown plan {plan!r}; plans: on_demand, monthly")
    price = launch_price(history(session, catalog), model.id, plan, now)
    return store.add_quote(
        session,
        QuoteRow(
            id=new_id(),
            user_id=user.id,
            gpu_model=model.id,
            data_centre=None,
            count=count,
            plan=plan,
            price_micros=price.micros,
            currency=price.currency,
            created_at=now,
            valid_until=now + validity,
        ),
    )


def honoured_quote(
    session: Session,
    user: UserRow,
    quote_id: str,
    gpu_model: str,
    count: int,
    plan: str,
    now: datetime,
) -> QuoteRow:
    """The user's quote if it is still valid and matches the launch; InvalidInput otherwise."""
    quote = store.get_quote(session, quote_id)
    if quote is None or quote.user_id != user.id:
        raise NotFound(f"no quote {quote_id!r}")
    if as_utc(quote.valid_until) <= now:
        expired = as_utc(quote.valid_until)
        raise InvalidInput(f"quote {quote_id} expired at {expired:%Y-%m-%d %H:%M:%S} UTC")
    if (quote.gpu_model, quote.count, quote.plan) != (gpu_model, count, plan):
        raise InvalidInput(
            f"quote {quote_id} is for {quote.count} × {quote.gpu_model} ({quote.plan}), "
            f"not {count} × {gpu_model} ({plan})"
        )
    return quote
