"""`bench/launch.py`'s database side: the users before a run, the settling and the checks after.

Checks, for each run: every accepted launch is an instance; each is placed (provisioning or
running, holding exactly its GPU count) or pending with the scheduler's reason; no node holds an
allocation on a GPU it does not have, nor more allocations than GPUs (the unique (node, GPU)
constraint already rules out a GPU held twice); `ledger.verify` balances.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from sqlalchemy import func, select

from cardhour.core.money import Money
from cardhour.db.engine import make_engine, make_sessionmaker, transaction
from cardhour.db.models import AllocationRow, InstanceRow, NodeRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, ledger
from cardhour.settings import Settings

WAITING = "waiting for the scheduler"  # a launch's reason until a scheduling cycle saw it


def setup_users(url: str, fleet: Path, data_dir: Path, clients: int) -> list[str]:
    """Migrate, load the fleet, and sign up one funded user per client; their API keys."""
    accounts._hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)  # set-up only
    settings = Settings(database_url=url, data_dir=data_dir, fleet_file=fleet)
    platform = Platform(settings)
    try:
        now = platform.clock.now()
        keys = []
        with transaction(platform.sessions) as s:
            for i in range(clients):
                user = customers.sign_up(
                    s, f"bench{i}@example.com", "pw-12345678", now, platform.trial()
                )
                ledger.top_up(s, user.id, Money.parse("1000000"), now, f"bench-{i}")
                keys.append(accounts.create_key(s, user, now).secret)
        return keys
    finally:
        platform.stop()


def settle(url: str, timeout: float) -> float:
    """Seconds until no launch waits for its first scheduling cycle (the reconcilers run)."""
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < timeout:
            with transaction(sessions) as s:
                stmt = select(func.count()).where(
                    InstanceRow.status == "pending", InstanceRow.status_reason == WAITING
                )
                if not s.scalar(stmt):
                    break
            time.sleep(0.2)
        return time.perf_counter() - started
    finally:
        engine.dispose()


def check(url: str, accepted: int) -> dict[str, Any]:
    """The checks of the module docstring, with the reconcilers stopped."""
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    problems: list[str] = []
    try:
        with transaction(sessions) as s:
            rows = list(
                s.execute(
                    select(
                        InstanceRow.id,
                        InstanceRow.status,
                        InstanceRow.status_reason,
                        InstanceRow.gpu_count,
                    )
                )
            )
            held = Counter(s.scalars(select(AllocationRow.instance_id)))
            per_node = dict(
                s.execute(
                    select(AllocationRow.node_id, func.count()).group_by(AllocationRow.node_id)
                ).all()
            )
            gpus = dict(s.execute(select(NodeRow.id, NodeRow.gpu_count)).all())
            beyond = AllocationRow.gpu_index >= NodeRow.gpu_count  # a GPU the node lacks
            outside = s.scalar(
                select(func.count())
                .select_from(AllocationRow)
                .join(NodeRow, NodeRow.id == AllocationRow.node_id)
                .where(beyond)
            )
            balanced = ledger.verify(s).balanced
    finally:
        engine.dispose()
    placed = pending = 0
    odd: Counter[str] = Counter()
    for instance_id, status, reason, count in rows:
        if status in ("provisioning", "running") and held[instance_id] == count:
            placed += 1
        elif (
            status == "pending" and (reason or "").startswith("pending:") and not held[instance_id]
        ):
            pending += 1
        else:
            odd[f"{status}: {reason}"] += 1
    over = sum(max(0, n - gpus.get(node, 0)) for node, n in per_node.items()) + (outside or 0)
    if len(rows) != accepted:
        problems.append(f"{len(rows)} instances for {accepted} accepted launches")
    problems += [f"{n} {what}" for what, n in odd.most_common(3)]
    if over:
        problems.append(f"{over} GPUs over-allocated")
    if not balanced:
        problems.append("ledger not balanced")
    return {"placed": placed, "pending": pending, "over_allocated": over, "problems": problems}
