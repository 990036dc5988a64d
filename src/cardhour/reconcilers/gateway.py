"""The marketplace gateway (`POST /api/v1/apps/{slug}/invoke`, the console's try-it form): an
entry point beside the reconcilers that owns a call's I/O and threads, kept to one database
statement on the call's path (docs/benchmarks/marketplace.md). What it decides is in
`services.marketplace.calls`; the app runs on an `core.replicas.AppRuntime`.

1. the caller's API key, the listed app and its live (approved) version, from caches: an entry
   serves for `KEY_TTL`/`APP_TTL` seconds, then is read again on the gateway's refresher thread
   while it goes on serving (up to `STALE_LIMIT` times its TTL; older, the call reads it
   itself). Ages are measured on the injected clock. `forget` drops them all at once: the API
   calls it after a review decision, a rollback and a sign-out in this process; other processes
   see such changes within about a TTL. A revoked key or a delisted app is refused as soon as a
   read finds it so;
2. the caller's spendable cash (`earnings.spendable`: posted cash less calls recorded but not
   settled), read the same way every `CASH_TTL` seconds, less what this process's calls spent
   and reserve meanwhile. A caller it does not cover is read again before being refused (402):
   calls are paid in cash, not credits. A call id already charged is refused (409), and so is
   one running in this process at the moment;
3. with no transaction open: the call on a replica (the runtime: routed to the least busy one,
   a cold start waited for; `core.errors.Overloaded` 429 over capacity, `Unavailable` 503 when
   no replica can start);
4. only when the app answered 2xx with JSON: one INSERT of the call (idempotent per caller and
   call id; `db.engine.make_statement_engine`: on PostgreSQL outside any transaction, on a
   connection without pre-ping; the commit does not wait for the disk), run as a
   `db.engine.DirectStatement` (compiled once, straight on a DBAPI cursor). The apps reconciler
   posts recorded calls to the ledger in batches (`earnings.settle`). A failed call is not
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
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from cardhour.core.clock import Clock
from cardhour.core.errors import CardhourError, Conflict, NotFound, Unauthorized
from cardhour.core.money import Money
from cardhour.core.replicas import AppRuntime
from cardhour.db.engine import DirectStatement, make_sessionmaker, transaction
from cardhour.services.ids import hash_secret, new_id
from cardhour.services.marketplace import calls, earnings
from cardhour.store.marketplace import calls as call_store

KEY_TTL = 5.0
APP_TTL = 2.0
CASH_TTL = 1.0
STALE_LIMIT = 10  # an entry older than this many TTLs is read on the call's path
MAX_ENTRIES = 10_000  # per cache; past it, entries too old to serve are dropped
T = TypeVar("T")

log = logging.getLogger("cardhour.gateway")


@dataclass(frozen=True)
class Invoked:
    call_id: str
    output: Any
    output_json: str  # `output` as the caller gets it (serialised once, while checked)
    price: Money
    duration_ms: int


@dataclass(frozen=True)
class _Key:
    caller: calls.Caller
    at: float  # clock seconds, when read


@dataclass(frozen=True)
class _Live:
    live: calls.LiveApp
    at: float  # clock seconds, when read


@dataclass
class _Wallet:
    """A caller's spendable cash as read at `read_at` (clock seconds, for its age), by a read
    that began at `read_seq` in the gateway's sequence of events, and this process's use of it
    since: `spent` (recorded: sequence number, price) and `reserved` (calls running now)."""

    cash: int = 0
    read_at: float = float("-inf")
    read_seq: int = -1
    spent: list[tuple[int, int]] = field(default_factory=list)
    reserved: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def available(self) -> int:
        # a call recorded after the read began may also be in the read: counted twice, which
        # only ever refuses early, and the next read corrects it
        return self.cash - sum(p for seq, p in self.spent if seq > self.read_seq) - self.reserved


class Gateway:
    """One process's gateway (module docstring); thread-safe."""

    def __init__(
        self,
        statements: Engine,
        clock: Clock,
        runtime: AppRuntime,
        code_dir: Path,
        currency: str,
        developer_bp: int,
    ) -> None:
        """`statements`: the engine of the gateway's reads and its INSERT
        (`db.engine.make_statement_engine`); `clock`: what the caches' ages are measured on."""
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
        self._seq = itertools.count()  # orders reads of cash and spending (next() is atomic)
        self._refresher = ThreadPoolExecutor(1, thread_name_prefix="gateway-refresh")
        self._insert = DirectStatement(
            statements, call_store.record_statement(statements.dialect.name)
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

    def wait_refreshed(self, timeout: float = 30.0) -> None:
        """Return once the reads queued on the refresher thread so far are done (tests: what a
        stale entry's refresh found, without waiting on the wall clock)."""
        with contextlib.suppress(RuntimeError):  # shut down: nothing runs any more
            self._refresher.submit(lambda: None).result(timeout)

    def replicas(self, key: str) -> int:
        """How many replicas of app version `key` run in this process."""
        return self.runtime.replicas(key)

    def invoke(
        self, api_key: str, slug: str, payload: dict[str, Any], call_key: str | None
    ) -> Invoked:
        """Call the app for the key's owner and charge them (module docstring). Raises
        Unauthorized, NotFound, InvalidInput (the call id), Conflict, InsufficientBalance,
        AppFailed, and the runtime's Overloaded, Unavailable or placement error; a call that
        raised is not charged."""
        key = new_id() if call_key is None else call_key
        earnings.check_call_key(key)
        caller_id = self._caller(api_key)
        live = self._live(slug).live
        price = Money(live.price_micros, self.currency)
        running = (caller_id, key)
        with self._lock:
            if running in self._running:
                raise Conflict(f"call id {key!r} is running", field="call_id")
            self._running.add(running)
        try:
            if call_key is not None:
                self._read(lambda s: calls.check_not_charged(s, caller_id, key))
            wallet = self._reserve(caller_id, price)
            try:
                result = self.runtime.call(live.spec, payload)
                output_json = calls.output_of(result)
                row = calls.new_call(
                    live, caller_id, key, result.duration_ms, self.clock.now(), self.developer_bp
                )
                call_id = self._record(row)
                if call_id is not None:
                    with wallet.lock:
                        wallet.spent.append((next(self._seq), live.price_micros))
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

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def _fresh(
        self, at: float, ttl: float, what: tuple[str, str], refresh: Callable[[], object]
    ) -> bool:
        """Whether an entry read at `at` may serve: younger than `ttl`; or younger than
        `STALE_LIMIT` × `ttl` while `refresh` reads it again on the refresher thread (so that a
        call never waits for a read of an entry in use). A negative age (the wall clock was
        stepped back) is too old: the entry is read again on the call's path."""
        age = self._now() - at
        if 0 <= age < ttl:
            return True
        if not 0 <= age < STALE_LIMIT * ttl:
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
        calls.check_unexpired(cached.caller, self.clock.now())
        return cached.caller.user_id

    def _read_key(self, hashed: str, api_key: str) -> _Key:
        at, generation = self._now(), self._generation
        try:
            caller = self._read(lambda s: calls.caller_of(s, api_key, self.clock.now()))
        except Unauthorized:
            with self._lock:  # `_young` iterates the dict under the lock
                self._keys.pop(hashed, None)
            raise
        entry = _Key(caller, at)
        with self._lock:
            if generation == self._generation:
                if len(self._keys) >= MAX_ENTRIES:
                    self._keys = self._young(self._keys, STALE_LIMIT * KEY_TTL)
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
        at, generation = self._now(), self._generation
        try:
            live = self._read(lambda s: calls.live_app(s, slug, self.code_dir))
        except NotFound:
            self._apps.pop(slug, None)
            raise
        entry = _Live(live, at)
        with self._lock:
            if generation == self._generation:
                self._apps[slug] = entry
        return entry

    def _reserve(self, caller_id: str, price: Money) -> _Wallet:
        with self._lock:
            if caller_id not in self._wallets and len(self._wallets) >= MAX_ENTRIES:
                now = self._now()
                self._wallets = {
                    k: w for k, w in self._wallets.items()
                    if w.reserved or now - w.read_at < STALE_LIMIT * CASH_TTL
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
            calls.check_covers(wallet.available(), price)
            wallet.reserved += price.micros
        return wallet

    def _read_cash(self, caller_id: str, wallet: _Wallet, locked: bool = False) -> None:
        seq, at = next(self._seq), self._now()
        cash = self._read(lambda s: earnings.spendable(s, caller_id))
        with contextlib.nullcontext() if locked else wallet.lock:
            if seq > wallet.read_seq:  # a later read may have landed meanwhile
                wallet.cash, wallet.read_at, wallet.read_seq = cash, at, seq
                wallet.spent = [(s, p) for s, p in wallet.spent if s > seq]

    def _record(self, row: dict[str, object]) -> str | None:
        try:
            return self._insert.run(row)
        except DBAPIError as exc:  # no pre-ping: a connection the server dropped fails once
            if not exc.connection_invalidated:
                raise
        # on a new connection; the INSERT may have landed before the drop
        call_id = str(row["id"])
        return self._insert.run(row) or (
            call_id if self._read(lambda s: calls.recorded(s, call_id)) else None
        )

    def _young(self, entries: dict[str, _Key], limit: float) -> dict[str, _Key]:
        now = self._now()
        return {k: e for k, e in entries.items() if now - e.at < limit}
