"""`bench/billing.py`'s data: a fresh database, a platform on it, and 10 running instances per
user set up in bulk the way launches leave them (see billing.py's docstring)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, select, text, update

from cardhour.core.clock import ManualClock
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, LedgerAccountRow, LedgerTransferRow, UserRow
from cardhour.platform import Platform
from cardhour.services.billing import ledger
from cardhour.settings import Settings

PER_USER = 10
RUNNING_FOR_S = 90
FUND_MICROS = 100_000 * 1_000_000  # per user: far more than 90 s of 10 instances
MODELS = ("H100", "A800", "RTX4090")
COUNTS = (1, 2, 4, 8)


@contextmanager
def fresh_database(kind: str, pg_url: str | None, tmp: Path) -> Iterator[str]:
    """A URL to an empty database: a new SQLite file, or a PostgreSQL database, dropped after."""
    name = f"bench_{uuid.uuid4().hex[:12]}"
    if kind == "sqlite":
        yield f"sqlite:///{tmp / (name + '.db')}"
        return
    assert pg_url is not None
    admin = create_engine(
        pg_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{pg_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def make_platform(url: str, tmp: Path) -> Platform:
    settings = Settings(
        database_url=url,
        data_dir=tmp / f"data-{uuid.uuid4().hex[:8]}",
        reconcilers={"charge_interval_seconds": 60, "autostop_margin_seconds": 10},
    )
    clock = ManualClock()
    platform = Platform(settings, clock=clock)
    clock.advance(hours=24)  # steady state: the price book's versions start a day before the runs
    return platform


def seed(platform: Platform, instances: int) -> None:
    """Users with funded cash, `instances` running instances each holding one hour (as a launch
    does), in bulk, in one transaction; every cached total matches the transfers."""
    catalog, currency = platform.catalog, platform.catalog.currency
    since = platform.clock.now() - timedelta(seconds=RUNNING_FOR_S)
    where = {m: next(n.data_centre for n in catalog.nodes if n.gpu_model == m) for m in MODELS}
    price = {m: catalog.prices.on_demand(m, where[m]).micros for m in MODELS}
    users = [uuid.uuid4().hex for _ in range(-(-instances // PER_USER))]
    rows = []
    for i in range(instances):
        model, count = MODELS[i % len(MODELS)], COUNTS[(i // len(MODELS)) % len(COUNTS)]
        rows.append(
            {
                "id": uuid.uuid4().hex,
                "owner_id": users[i // PER_USER],
                "name": f"i{i}",
                "gpu_model": model,
                "gpu_count": count,
                "image": catalog.images[0].id,
                "plan": "on_demand",
                "status": "running",
                "desired": "running",
                "data_centre": where[model],
                "price_micros": price[model],
                "currency": currency,
                "attempt": 1,
                "running_since": since,
                "charged_at": since,
                "usage_closed": 0,
                "billed_micros": 0,
                "billed_closed_micros": 0,
                "created_at": since,
                "updated_at": since,
            }
        )
    hour = {r["id"]: r["price_micros"] * r["gpu_count"] for r in rows}
    held: dict[str, int] = dict.fromkeys(users, 0)
    for r in rows:
        held[r["owner_id"]] += hour[r["id"]]
    cash = {u: ledger.user_key(u, ledger.CASH) for u in users}
    hold = {r["id"]: ledger.hold_key(r["owner_id"], r["id"]) for r in rows}

    def account(
        key: str, kind: str, owner: str, debits: int, credits: int, **more: Any
    ) -> dict[str, Any]:
        return {
            "key": key,
            "owner_id": owner,
            "kind": kind,
            "currency": currency,
            "debits_posted": debits,
            "credits_posted": credits,
            "created_at": since,
            **more,
        }

    def transfer(
        tid: str, debit: int, credit: int, amount: int, kind: str, ref: str
    ) -> dict[str, Any]:
        return {
            "id": tid,
            "debit_account_id": debit,
            "credit_account_id": credit,
            "amount": amount,
            "currency": currency,
            "kind": kind,
            "ref": ref,
            "created_at": since,
        }

    with transaction(platform.sessions) as s:
        s.execute(
            insert(UserRow),
            [
                {
                    "id": u,
                    "email": f"{u}@bench.example",
                    "password_hash": "!",
                    "role": "user",
                    "created_at": since,
                }
                for u in users
            ],
        )
        s.execute(insert(InstanceRow), rows)
        s.execute(
            insert(LedgerAccountRow),
            [account(cash[u], ledger.CASH, u, held[u], FUND_MICROS) for u in users]
            + [
                account(
                    hold[r["id"]], ledger.HOLD, r["owner_id"], 0, hour[r["id"]], instance_id=r["id"]
                )
                for r in rows
            ],
        )
        cash_in = ledger.platform_key("cash_in")
        ids = {k: i for k, i in s.execute(select(LedgerAccountRow.key, LedgerAccountRow.id))}
        s.execute(
            insert(LedgerTransferRow),
            [
                transfer(f"topup:bench-{u}", ids[cash_in], ids[cash[u]], FUND_MICROS, "top_up", u)
                for u in users
            ]
            + [
                transfer(
                    f"hold:{r['id']}:0:{ids[cash[r['owner_id']]]}",
                    ids[cash[r["owner_id"]]],
                    ids[hold[r["id"]]],
                    hour[r["id"]],
                    "hold",
                    r["id"],
                )
                for r in rows
            ],
        )
        s.execute(
            update(LedgerAccountRow)
            .where(LedgerAccountRow.key == cash_in)
            .values(debits_posted=LedgerAccountRow.debits_posted + FUND_MICROS * len(users))
        )
