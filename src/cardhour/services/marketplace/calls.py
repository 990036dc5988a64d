"""The marketplace gateway's work for one call (`POST /api/v1/apps/{slug}/invoke`), kept to one
database statement on the call's path (docs/benchmarks/marketplace.md):

1. the caller's API key, the listed app and its live (approved) version, from caches: an entry
   serves for `KEY_TTL`/`APP_TTL` seconds, then is read again on the gateway's refresher thread
   while it goes on serving (up to `STALE_LIMIT` times its TTL; older, the call reads it
   itself). `forget` drops them all at once: the API calls it after a review decision, a
   rollback and a sign-out in this process; other processes see such changes within about a
   TTL. A revoked key or a delisted app is refused as soon as a read finds it so;
2. the caller's spendable cash (`app_earnings.spendable`: posted cash less calls recorded but not
   settled), read the same way every `CASH_TTL` seconds, less what this process's calls spent
   and reserve meanwhile. A caller it does not cover is read again before being refused (402):
   calls are paid in cash, not credits. A call id already charged is refused (409), and so is
   one running in this process at the moment;
3. with no transaction open: the call on a replica (`backends.apps.runtime`: routed to the least
   busy one, a cold start waited for, 429 over capacity, 503 when no replica can start);
4. only when the app answered 2xx: one INSERT of the call (idempotent per caller and call id;
   `db.engine.make_statement_engine`: on PostgreSQL outside any transaction, on a connection
   without pre-ping; the commit does not wait for the disk), run as a
   `db.engine.DirectStatement` (compiled once, straight on a DBAPI cursor). The apps reconciler
   posts recorded calls to the ledger in batches (`app_earnings.settle`). A failed call is not
   recorded.

What this trades: a gateway crash between the app's answer and the INSERT, or a database crash
just after it, leaves that call uncharged (the ledger stays consistent); a caller calling
through several gateway processes at once can overspend their cash by what the others spent
within `CASH_TTL` (up to `STALE_LIMIT` × that while a refresher lags behind; the settlement
posts it as debt, as metering does before an auto-stop); the same call id sent to two
processes at the same moment can run twice and is charged once (the second gets 409). An
output that is not JSON (NaN, Infinity) is an app failure (502), not charged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from cardhour.backends.apps.runtime import AppSpec, LocalAppRuntime
from cardhour.core.clock import Clock, as_utc
from cardhour.core.errors import (
    CardhourError,
    Conflict,
    InsufficientBalance,
    NotFound,
    Unauthorized,
)
from cardhour.core.money import Money
from cardhour.db.engine import DirectStatement, make_sessionmaker, transaction
from cardhour.db.models import AppCallRow, AppRow, AppVersionRow
from cardhour.services.accounts import users as accounts
from cardhour.services.ids import hash_secret, new_id
from cardhour.services.marketplace import apps
from cardhour.services.marketplace import earnings as app_earnings

KEY_TTL = 5.0
APP_TTL = 2.0
CASH_TTL = 1.0
STALE_LIMIT = 10  # an entry older than this many TTLs is read on the call's path
MAX_ENTRIES = 10_000  # per cache; past it, entries too old to serve are dropped
T = TypeVar("T")

log = logging.getLogger("cardhour.gateway")


class AppFailed(CardhourError):
    """The app itself failed the call (not charged)."""

    code = "app_failed"
    http_status = 502


@dataclass(frozen=True)
class Invoked:
    call_id: str
    output: Any
    output_json: str  # `output` as the caller gets it (serialised once, while checked)
    price: Money
    duration_ms: int


@dataclass(frozen=True)
class _Key:
    user_id: str
    expires_at: datetime | None
    at: float  # monotonic, when read


@dataclass(frozen=True)
class _Live:
    """A listed app's live version, as calls need it."""

    app_id: str
    developer_id: str
    version: int
    price_micros: int
    spec: AppSpec
    at: float  # monotonic, when read


@dataclass
class _Wallet:
    """A caller's spendable cash as read at `read_at` (monotonic), and this process's use of it
    since: `spent` (recorded: when, price) and `reserved` (calls running now)."""

    cash: int = 0
    read_at: float = float("-inf")
    spent: list[tuple[float, int]] = field(default_factory=list)
    reserved: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def available(self) -> int:
        # a call recorded after the read started may also be in the read: counted twice, which
        # only ever refuses early, and the next read corrects it
        return self.cash - sum(p for at, p in self.spent if at >= self.read_at) - self.reserved


class Gateway:
    def __init__(
        self,
        statements: Engine,
        clock: Clock,
        runtime: LocalAppRuntime,
        code_dir: Path,
        currency: str,
        developer_bp: int,
    ) -> None:
        """`statements`: the engine of the gateway's reads and its INSERT
        (`db.engine.make_statement_engine`)."""
        self.statements, self.clock = statements, clock
        self._reads = make_sessionmaker(statements)  # no write lock, no transaction to commit
        self.runtime, self.code_dir = runtime, code_dir
        self.currency, self.developer_bp = currency, developer_bp
        self._keys: dict[str, _Key] = {}
        self._apps: dict[str, _Live] = {}
        self._wallets: dict[str, _Wallet] = {}
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._refreshing: set[tuple[str, str]] = set()
        self._generation = 0  # `forget` moves it: a read begun before stores nothing
        self._refresher = ThreadPoolExecutor(1, thread_name_prefix="gateway-refresh")
        self._insert = DirectStatement(
            statements, app_earnings.record_statement(statements.dialect.name)
        )

    def close(self) -> None:
        self._refresher.shutdown(wait=True, cancel_futures=True)
        self._insert.close()

    def forget(self) -> None:
        """Drop every cached key and app (after a change this process made); reads that started
        before do not store what they found. Balances stay: they hold the reservations of calls
        running now."""
        with self._lock:
            self._generation += 1
            self._keys.clear()
            self._apps.clear()

    def forget_key(self, api_key: str) -> None:
        """Drop one key (its session was signed out here)."""
        with self._lock:
            self._generation += 1
            self._keys.pop(hash_secret(api_key), None)

    def invoke(
        self, api_key: str, slug: str, payload: dict[str, Any], call_key: str | None
    ) -> Invoked:
        key = new_id() if call_key is None else call_key
        app_earnings.check_call_key(key)
        caller_id = self._caller(api_key)
        live = self._live(slug)
        price = Money(live.price_micros, self.currency)
        running = (caller_id, key)
        with self._lock:
            if running in self._running:
                raise Conflict(f"call id {key!r} is running", field="call_id")
            self._running.add(running)
        try:
            if call_key is not None:
                done = self._read(lambda s: app_earnings.call_by_key(s, caller_id, key))
                if done is not None:
                    raise Conflict(
                        f"call id {key!r} was already charged (call {done.id})", field="call_id"
                    )
            wallet = self._reserve(caller_id, price)
            try:
                result = self.runtime.call(live.spec, payload)
                if not 200 <= result.status < 300:
                    body = result.body
                    reason = body.get("error") if isinstance(body, dict) else None
                    raise AppFailed(
                        f"the app failed ({result.status}): {reason or 'no reason given'}"
                    )
                try:  # what the caller will get must be JSON before they pay for it
                    output_json = json.dumps(
                        result.body, allow_nan=False, ensure_ascii=False, separators=(",", ":")
                    )
                except ValueError:
                    raise AppFailed("the app's output is not JSON (NaN or Infinity)") from None
                call = app_earnings.NewCall(
                    live.app_id, live.version, caller_id, live.developer_id, key,
                    live.price_micros, result.duration_ms,
                )  # fmt: skip
                call_id = self._record(call)
                if call_id is not None:
                    with wallet.lock:
                        wallet.spent.append((time.monotonic(), live.price_micros))
            finally:
                with wallet.lock:
                    wallet.reserved -= live.price_micros
        finally:
            with self._lock:
                self._running.discard(running)
        if call_id is None:
            raise Conflict(f"call id {key!r} was already charged", field="call_id")
        return Invoked(call_id, result.body, output_json, price, result.duration_ms)

    # -- inside ---------------------------------------------------------------------------

    def _fresh(
        self, at: float, ttl: float, what: tuple[str, str], refresh: Callable[[], object]
    ) -> bool:
        """Whether an entry read at `at` may serve: younger than `ttl`; or younger than
        `STALE_LIMIT` × `ttl` while `refresh` reads it again on the refresher thread (so that a
        call never waits for a read of an entry in use)."""
        age = time.monotonic() - at
        if age < ttl:
            return True
        if age >= STALE_LIMIT * ttl:
            return False
        with self._lock:
            if what in self._refreshing:
                return True
            self._refreshing.add(what)

        def run() -> None:
            try:
                refresh()
            except CardhourError:  # revoked, delisted: the entry is gone, the next call says so
                pass
            except Exception:  # noqa: BLE001 - the next call reads it inline and says why
                log.warning("gateway: refreshing %s failed", what[0], exc_info=True)
            finally:
                with self._lock:
                    self._refreshing.discard(what)

        try:
            self._refresher.submit(run)
        except RuntimeError:  # shut down
            return False
        return True

    def _read(self, fn: Callable[[Session], T]) -> T:
        """`fn` in a read transaction of the statement engine, once more if the database had
        dropped the connection (no pre-ping there)."""
        try:
            with transaction(self._reads) as session:
                return fn(session)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        with transaction(self._reads) as session:
            return fn(session)

    def _caller(self, api_key: str) -> str:
        hashed = hash_secret(api_key)
        cached = self._keys.get(hashed)
        if cached is None or not self._fresh(
            cached.at, KEY_TTL, ("key", hashed), lambda: self._read_key(hashed, api_key)
        ):
            cached = self._read_key(hashed, api_key)
        if cached.expires_at is not None and as_utc(cached.expires_at) <= self.clock.now():
            raise Unauthorized("session expired: sign in again")
        return cached.user_id

    def _read_key(self, hashed: str, api_key: str) -> _Key:
        at, generation = time.monotonic(), self._generation
        try:
            user, row = self._read(
                lambda s: accounts.authenticate_key(s, api_key, self.clock.now())
            )
        except Unauthorized:
            self._keys.pop(hashed, None)
            raise
        entry = _Key(user.id, row.expires_at, at)
        with self._lock:
            if generation == self._generation:
                if len(self._keys) >= MAX_ENTRIES:
                    self._keys = _young(self._keys, STALE_LIMIT * KEY_TTL)
                self._keys[hashed] = entry
        return entry

    def _live(self, slug: str) -> _Live:
        cached = self._apps.get(slug)
        if cached is None or not self._fresh(
            cached.at, APP_TTL, ("app", slug), lambda: self._read_app(slug)
        ):
            cached = self._read_app(slug)
        return cached

    def _read_app(self, slug: str) -> _Live:
        at, generation = time.monotonic(), self._generation

        def read(session: Session) -> tuple[AppRow, AppVersionRow]:
            app = apps.listed(session, slug)
            return app, apps.live_of(session, app)

        try:
            app, version = self._read(read)
        except NotFound:
            self._apps.pop(slug, None)
            raise
        spec = apps.spec_of(self.code_dir, app, version)
        entry = _Live(app.id, app.developer_id, version.version, version.price_micros, spec, at)
        with self._lock:
            if generation == self._generation:
                self._apps[slug] = entry
        return entry

    def _reserve(self, caller_id: str, price: Money) -> _Wallet:
        with self._lock:
            if caller_id not in self._wallets and len(self._wallets) >= MAX_ENTRIES:
                self._wallets = {
                    k: w for k, w in self._wallets.items()
                    if w.reserved or time.monotonic() - w.read_at < STALE_LIMIT * CASH_TTL
                }  # fmt: skip
            wallet = self._wallets.setdefault(caller_id, _Wallet())
        fresh = self._fresh(
            wallet.read_at,
            CASH_TTL,
            ("cash", caller_id),
            lambda: self._read_cash(caller_id, wallet),
        )
        if not fresh:
            self._read_cash(caller_id, wallet)
        with wallet.lock:  # one caller's calls wait for each other, nobody else's
            if wallet.available() < price.micros:  # read again before refusing
                self._read_cash(caller_id, wallet, locked=True)
            have = wallet.available()
            if have < price.micros:
                shown = Money(max(have, 0), self.currency)
                raise InsufficientBalance(
                    f"cash {shown.floor_str()} {self.currency} does not cover one call "
                    f"({price.display()} {self.currency}); app calls are paid in cash (top up), "
                    "not with credits",
                    needed=price.display(),
                    available=shown.floor_str(),
                )
            wallet.reserved += price.micros
        return wallet

    def _read_cash(self, caller_id: str, wallet: _Wallet, locked: bool = False) -> None:
        started = time.monotonic()
        cash = self._read(lambda s: app_earnings.spendable(s, caller_id))
        with contextlib.nullcontext() if locked else wallet.lock:
            if started > wallet.read_at:  # a later read may have landed meanwhile
                wallet.cash, wallet.read_at = cash, started
                wallet.spent = [(at, p) for at, p in wallet.spent if at >= started]

    def _record(self, call: app_earnings.NewCall) -> str | None:
        row = app_earnings.call_row(call, self.clock.now(), self.developer_bp)
        try:
            return self._insert.run(row)
        except DBAPIError as exc:  # no pre-ping: a connection the server dropped fails once
            if not exc.connection_invalidated:
                raise
        # on a new connection; the INSERT may have landed before the drop
        return self._insert.run(row) or self._read(
            lambda s: s.scalar(select(AppCallRow.id).where(AppCallRow.id == row["id"]))
        )


def _young(entries: dict[str, _Key], limit: float) -> dict[str, _Key]:
    now = time.monotonic()
    return {k: e for k, e in entries.items() if now - e.at < limit}
