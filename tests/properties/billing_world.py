"""The world the billing state machine acts on (test_billing_stateful.py has its rules): a fresh
platform per example on a small fleet, the model's record of prices and events, the helpers the
rules share, and the properties checked after every step.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from tempfile import mkdtemp
from typing import Any, ClassVar
from unittest import mock

from fastapi.testclient import TestClient
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
)
from sqlalchemy import event, func, select

from cardhour.api.app import create_app
from cardhour.core.clock import ManualClock, as_utc
from cardhour.db.engine import transaction
from cardhour.db.models import (
    InstanceEventRow,
    InstanceRow,
    LedgerAccountRow,
    LedgerTransferRow,
    UsageSegmentRow,
)
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger, metering, pricing, wallet
from cardhour.services.compute import instances as instances_service
from cardhour.services.compute import provisioning
from cardhour.settings import Settings
from tests.properties import billing_model as model
from tests.properties.conftest import Databases

GPUS = ("H100", "A800", "RTX4090")
PRICES = ("0.000001", "0.60", "1.234567", "1.90", "7.77", "60.00", "250.00")
AMOUNTS = ("0.01", "0.50", "2.00", "10.00", "25.00", "100.00", "1000.00", "5000.00")
#: Clock starts: the default, and shortly before month (and year) ends.
STARTS = (
    datetime(2026, 1, 1, tzinfo=UTC),
    datetime(2026, 1, 31, 23, 30, tzinfo=UTC),
    datetime(2026, 2, 28, 23, 45, tzinfo=UTC),
    datetime(2026, 12, 31, 23, 40, tzinfo=UTC),
)
RECONCILE_EVERY = 60  # seconds of simulated time, as the live loop
COMMITTED = ("pending", "provisioning", "running")
MAX_USERS = 4
MAX_LEAPS = 3  # per example: each may move the clock a month
AUTOSTOP_BOUND_SECONDS = 120


class SimulatedCrash(BaseException):
    """A reconciler killed part-way: nothing catches it, the transaction rolls back."""


#: name -> (object, attribute) patched to do its work and then crash
CRASH_POINTS: dict[str, tuple[Any, str]] = {
    "wallet.charge": (wallet, "charge"),
    "metering.close_segment": (metering, "close_segment"),
    "ledger.Book.flush": (ledger.Book, "flush"),
    "provisioning.apply_running": (provisioning, "apply_running"),
}


@dataclass(frozen=True, eq=False)
class User:
    id: str
    email: str
    headers: dict[str, str]

    def __repr__(self) -> str:
        return f"User({self.email})"


@dataclass(frozen=True, eq=False)
class Instance:
    id: str
    name: str
    owner: User
    gpu: str
    count: int
    plan: str
    at_expiry: str | None
    held_monthly_micros: int | None  # monthly: the per card-hour price held at launch

    def __repr__(self) -> str:
        return f"Instance({self.name})"


class BillingWorld(RuleBasedStateMachine):
    databases: ClassVar[Databases]
    steps: ClassVar[int] = 0
    seen: ClassVar[Counter[str]]  # what the run exercised (reported, and checked in CI)

    def __init__(self) -> None:
        super().__init__()
        self.platform: Platform | None = None
        self.data_dir: Path | None = None
        self.url: str | None = None

    # ---- set-up and helpers ---------------------------------------------------------------

    @initialize(start=st.sampled_from(STARTS), offset=st.integers(0, 1800))
    def boot(self, start: datetime, offset: int) -> None:
        ids = itertools.count(1)
        self.patches = [  # ids in creation order: a run replays the same way, and shrinks
            mock.patch.object(module, "new_id", lambda: f"{next(ids):016x}")
            for module in (accounts, instances_service, pricing)
        ]
        for p in self.patches:
            p.start()
        self.data_dir = Path(mkdtemp(prefix="billing-"))
        self.url = self.databases.new(self.data_dir)
        self.clock = ManualClock(start + timedelta(seconds=offset))
        settings = Settings(
            data_dir=self.data_dir,
            database_url=self.url,
            fleet_file=self.databases.fleet,
            sim={"provision_seconds": 30},
            reconcilers={"charge_interval_seconds": 0},
        )
        self.platform = Platform(settings, clock=self.clock)
        if self.url.startswith("sqlite"):
            event.listen(self.platform.engine, "connect", _no_fsync)
            self.platform.engine.dispose()  # pooled connections reopen with it
        self.client = TestClient(create_app(self.platform))
        self.client.__enter__()  # one event loop for every request of the example
        catalog = self.platform.catalog
        self.discount = catalog.prices.monthly_discount_percent
        self.dcs = {m: pricing.model_dcs(catalog, m) for m in GPUS}
        self.book = model.PriceBook()
        for gpu, dcs in self.dcs.items():
            for dc in dcs:
                self.book.add(gpu, dc, model.EPOCH, catalog.prices.on_demand(gpu, dc).micros, 0)
        email, password = self.platform.bootstrap_admin()
        r = self.client.post("/api/v1/auth/login", json={"email": email, "password": password})
        assert r.status_code == 200, r.text
        self.admin = User(r.json()["user"]["id"], email, bearer(r.json()["api_key"]))
        self.known: list[Instance] = []
        self.user_count = 0
        self.names = 0
        self.metered_at = self.clock.now()  # the last metering pass that committed
        self.since_reconcile = 0
        self.step_no = 0  # steps done (the invariant counts them)
        self.dc_of: dict[str, dict[int, str]] = defaultdict(dict)  # instance -> attempt -> dc
        self.placed_in: dict[str, dict[int, int]] = defaultdict(dict)  # ... -> step it was seen
        self.peak_rate: dict[str, int] = defaultdict(int)  # owner -> micro-units per hour
        self.on_demand_live: list[Instance] = []  # pending, provisioning or running on demand
        self.billable: dict[str, Instance] = {}  # may have run since the last check, any plan
        self.running_gpus: set[str] = set()  # models with an instance running
        self.plan_ends: list[datetime] = []
        self.leaps = 0
        self.plans_seen: set[str] = set()
        self.months_seen: set[str] = set()
        self.cash_low = 0
        self.events: dict[str, list[model.Event]] = defaultdict(list)  # by instance, in order
        self.last_event = 0
        self.expected: dict[str, Any] = {}  # instance -> (inputs, what `_expected` made of them)

    def teardown(self) -> None:
        if getattr(self, "plans_seen", None) is not None:
            self.seen["monthly plans charged"] += len(self.plans_seen)
            self.seen["runs billed across a month boundary"] += len(self.months_seen)
            self.seen["examples with a cash account below zero"] += self.cash_low < 0
        for p in getattr(self, "patches", []):
            p.stop()
        if self.platform is None:
            return
        self.client.__exit__(None, None, None)
        self.platform.stop()
        if self.url is not None:
            self.databases.drop(self.url)

    def _reconcile(self) -> None:
        assert self.platform is not None
        self.platform.reconcile()
        self.metered_at = self.clock.now()
        self.since_reconcile = 0

    def _advance(self, seconds: int) -> None:
        """Move the clock, reconciling whenever 60 s passed since the last pass."""
        while seconds > 0:
            step = min(seconds, RECONCILE_EVERY - self.since_reconcile)
            self.clock.advance(step)
            seconds -= step
            self.since_reconcile += step
            if self.since_reconcile >= RECONCILE_EVERY:
                self._reconcile()

    def _spendable(self, user: User, gpu: str) -> int:
        """What a new hold for `gpu` can draw: unexpired credits usable for it, positive cash."""
        assert self.platform is not None
        now = self.clock.now()
        with transaction(self.platform.sessions) as s:
            rows = list(
                s.scalars(select(LedgerAccountRow).where(LedgerAccountRow.owner_id == user.id))
            )
        total = 0
        for r in rows:
            usable = r.kind == ledger.CASH or (
                r.kind in ledger.CREDIT_KINDS
                and (r.expires_at is None or as_utc(r.expires_at) > now)
                and (not r.gpu_models or gpu in r.gpu_models.split(","))
            )
            total += max(ledger.balance_of(r), 0) if usable else 0
        return total

    def _hold_for(self, gpu: str, count: int, plan: str) -> int:
        """The launch hold: an hour of the dearest data centre, or 30 days of its monthly price."""
        price = self.book.highest(gpu, self.dcs[gpu], self.clock.now())
        if plan == "monthly":
            return model.monthly(price, self.discount) * count * model.PLAN_HOURS
        return price * count

    def _cash_of(self, user: User) -> int:
        assert self.platform is not None
        with transaction(self.platform.sessions) as s:
            row = _cash(s, user)
            return ledger.balance_of(row) if row is not None else 0

    @invariant()
    def books_balance_and_every_bill_is_exact(self) -> None:
        assert self.platform is not None
        type(self).steps += 1
        self.step_no += 1
        with transaction(self.platform.sessions) as s:
            check = ledger.verify(s)
            rows = s.execute(
                select(
                    InstanceRow.id,
                    InstanceRow.owner_id,
                    InstanceRow.status,
                    InstanceRow.plan,
                    InstanceRow.attempt,
                    InstanceRow.data_centre,
                    InstanceRow.billed_micros,
                    InstanceRow.running_since,
                )
            ).all()
            new_events = s.execute(
                select(
                    InstanceEventRow.id,
                    InstanceEventRow.instance_id,
                    InstanceEventRow.at,
                    InstanceEventRow.from_status,
                    InstanceEventRow.to_status,
                    InstanceEventRow.reason,
                )
                .where(InstanceEventRow.id > self.last_event)
                .order_by(InstanceEventRow.id)
            ).all()
            money = s.execute(
                select(
                    LedgerAccountRow.key,
                    LedgerAccountRow.kind,
                    LedgerAccountRow.owner_id,
                    LedgerAccountRow.instance_id,
                    LedgerAccountRow.credits_posted - LedgerAccountRow.debits_posted,
                ).where(LedgerAccountRow.kind.in_([ledger.CASH, ledger.HOLD]))
            ).all()
            per_segment = s.execute(
                select(
                    UsageSegmentRow.instance_id, func.sum(UsageSegmentRow.amount_micros)
                ).group_by(UsageSegmentRow.instance_id)
            )
            segments = {str(i): int(total) for i, total in per_segment}
            plan_paid: dict[str, int] = {}
            if any(i.plan == "monthly" for i in self.known):
                totals = s.execute(
                    select(LedgerTransferRow.ref, func.sum(LedgerTransferRow.amount))
                    .where(LedgerTransferRow.kind == "plan")
                    .group_by(LedgerTransferRow.ref)
                )
                plan_paid = {str(ref): int(total) for ref, total in totals}
        assert check.balanced and not check.problems, check.problems
        by_instance = self.events
        for event_id, instance_id, at, from_status, to_status, reason in new_events:
            by_instance[instance_id].append(model.Event(as_utc(at), from_status, to_status))
            for what in ("balance low", "stopped automatically", "monthly plan ended"):
                self.seen[f"events: {what}"] += (reason or "").startswith(what)
            self.last_event = event_id
        known = {i.id: i for i in self.known}
        assert sorted(r.id for r in rows) == sorted(known), "an instance nobody launched, or lost"
        status = {r.id: r.status for r in rows}
        # whatever may have run during the step (live at the last check or now, as a plan may
        # have turned on demand and an instance stopped in between) at its dearest price ever
        billable_before, self.billable = self.billable, {}
        self.on_demand_live, self.running_gpus, self.plan_ends = [], set(), []
        for row in rows:
            inst = known[row.id]
            if row.attempt:
                seen = self.dc_of[row.id].setdefault(row.attempt, str(row.data_centre))
                assert seen == row.data_centre, f"{inst}: attempt {row.attempt} moved"
                self.placed_in[row.id].setdefault(row.attempt, self.step_no)
            h, billed, exact, closed = self._expected(inst, row.running_since)
            if inst.plan == "monthly" and h.intervals:
                self._check_plan(inst, h, int(plan_paid.get(row.id, 0)))
                self.plans_seen.add(row.id)
                self.plan_ends.append(h.intervals[0].start + timedelta(days=model.PLAN_DAYS))
            else:
                assert int(plan_paid.get(row.id, 0)) == 0, f"{inst}: plan charge before it ran"
            if any(model.next_month(iv.start) < (iv.end or self.metered_at) for iv in billed):
                self.months_seen.add(row.id)
            assert abs(row.billed_micros - exact) <= 1, (
                f"{inst}: charged {row.billed_micros} µ, exact usage × rate is {float(exact):.3f} "
                f"µ (intervals {billed}, prices {dict(self.book.versions)})"
            )
            # finished segments (all but the open one) add up to their exact cost, rounded once
            assert segments.get(row.id, 0) == model.half_up(closed), (
                f"{inst}: its usage segments add up to {segments.get(row.id)} µ, the exact cost "
                f"of the finished ones is {float(closed):.3f} µ"
            )
            if row.status in (*COMMITTED, "stopping"):
                self.billable[row.id] = inst
            if row.plan == "on_demand" and row.status in COMMITTED:
                self.on_demand_live.append(inst)
            if row.status == "running":
                self.running_gpus.add(inst.gpu)
        live_rate: dict[str, int] = defaultdict(int)
        for inst in {**billable_before, **self.billable}.values():
            live_rate[inst.owner.id] += inst.count * self.book.dearest_ever(inst.gpu)
        for key, kind, owner_id, held_for, balance in money:
            if kind == ledger.HOLD:
                assert held_for is not None
                if status[held_for] not in COMMITTED:
                    assert balance == 0, f"{key}: hold kept while {status[held_for]}"
            elif owner_id is not None:
                peak = self.peak_rate[owner_id] = max(self.peak_rate[owner_id], live_rate[owner_id])
                bound = -(peak * AUTOSTOP_BOUND_SECONDS // 3600) - 1
                self.cash_low = min(self.cash_low, balance)
                assert balance >= bound, (
                    f"{key}: cash {balance} µ is below the auto-stop bound {bound}"
                )

    def _expected(
        self, inst: Instance, running_since: datetime | None
    ) -> tuple[model.History, list[model.Interval], Fraction, Fraction]:
        """The instance's history, billed intervals, exact cost to the last metering and exact
        cost of its finished segments (those before `running_since`, the open one's start);
        worked out again only when an input changed."""
        events = self.events[inst.id]
        key = (len(events), self.metered_at, running_since, self.book.size)
        cached = self.expected.get(inst.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        h = model.history(events)
        billed = model.billable(h, inst.plan, inst.at_expiry)
        dcs = self.dc_of[inst.id]
        exact = model.usage_cost(self.book, inst.gpu, inst.count, billed, dcs, self.metered_at)
        open_from = as_utc(running_since) if running_since else model.EPOCH
        closed = model.usage_cost(self.book, inst.gpu, inst.count, billed, dcs, open_from)
        self.expected[inst.id] = (key, (h, billed, exact, closed))
        return h, billed, exact, closed

    def _placement_price(self, inst: Instance, h: model.History, attempt: int) -> int:
        """The on-demand price where and when `attempt` was placed, as the book stood then (a
        change set later at that same instant came after the placement)."""
        return self.book.at(
            inst.gpu,
            self.dc_of[inst.id][attempt],
            h.placed_at[attempt],
            set_before=self.placed_in[inst.id][attempt],
        )

    def _check_plan(self, inst: Instance, h: model.History, paid: int) -> None:
        """Charged once, at the monthly price where it first ran, when it was placed there, never
        above the plan price held at launch (a start after a stop holds that price again)."""
        attempt = h.intervals[0].attempt
        price = model.monthly(self._placement_price(inst, h, attempt), self.discount)
        if inst.held_monthly_micros is not None:
            price = min(price, inst.held_monthly_micros)
        assert paid == price * inst.count * model.PLAN_HOURS, (inst, paid, price)


def _no_fsync(dbapi_conn: Any, _record: Any) -> None:
    """A commit costs ~2 ms of fsync with `synchronous=FULL`; nothing here outlives a power cut."""
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA synchronous=OFF")
    cursor.close()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _cash(session: Any, user: User) -> LedgerAccountRow | None:
    key = ledger.user_key(user.id, ledger.CASH)
    return session.scalars(select(LedgerAccountRow).where(LedgerAccountRow.key == key)).first()
