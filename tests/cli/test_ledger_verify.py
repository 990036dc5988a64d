"""`cardhour admin ledger verify` on the server's database (both databases), in process.

The ledger is made by real activity through the API (sign-up, top-up, launch, metering), then
checked, then tampered with in SQL the way a bug or a hand edit would.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from click.testing import Result
from sqlalchemy import text
from typer.testing import CliRunner

from cardhour.cli.main import app
from cardhour.core.clock import ManualClock
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import ledger
from cardhour.settings import Settings
from tests.conftest import Api


def verify(*args: str, url: str | None) -> Result:
    """The command with the database named by CARDHOUR_DATABASE_URL (None: unset)."""
    env = {"CARDHOUR_DATABASE_URL": url, "CARDHOUR_DATA_DIR": None}
    return CliRunner().invoke(app, ["admin", "ledger", "verify", *args], env=env)


def as_json(url: str, exit_code: int) -> dict[str, Any]:
    result = verify("--json", url=url)
    assert result.exit_code == exit_code, result.output
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def activity(api: Api) -> list[str]:
    """Two users, a top-up, instances that run, bill and stop; returns the users' ids."""
    alice, bob = api.signup(), api.signup()
    api.top_up(alice, "50")
    for headers, name in ((alice, "a1"), (alice, "a2"), (bob, "b1")):
        body = {"gpu": "H100", "count": 1, "name": name}
        r = api.client.post("/api/v1/instances", headers=headers, json=body)
        assert r.status_code == 201, r.text
    api.settle()
    api.settle(30)  # provisioned: running
    api.settle(1800)  # a charge per instance
    assert api.client.post("/api/v1/instances/a2/stop", headers=alice).status_code == 200
    api.settle(7200)  # bob's trial credit runs out: auto-stop
    return [user_id(api, h) for h in (alice, bob)]


def user_id(api: Api, headers: dict[str, str]) -> str:
    with transaction(api.platform.sessions) as s:
        key = headers["Authorization"].removeprefix("Bearer ")
        return accounts.authenticate(s, key, api.clock.now()).id


def execute(api: Api, sql: str, **params: Any) -> None:
    with transaction(api.platform.sessions) as s:
        s.execute(text(sql), params)


def test_balanced_after_real_activity(api: Api, database_url: str) -> None:
    activity(api)
    result = verify(url=database_url)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ledger: balanced\n")
    assert "problems: none" in result.stdout

    payload = as_json(database_url, 0)
    with transaction(api.platform.sessions) as s:
        expected = dataclasses.asdict(ledger.verify(s))
        transfers = s.execute(text("SELECT count(*) FROM ledger_transfers")).scalar_one()
        accounts_ = s.execute(text("SELECT count(*) FROM ledger_accounts")).scalar_one()
    assert payload == expected  # exactly the Verification, whatever fields it grows
    assert payload["balanced"] is True and payload["problems"] == []
    assert (payload["accounts"], payload["transfers"]) == (accounts_, transfers)
    assert transfers > 6  # trial ×2, top-up, usage: the activity really posted


def test_a_tampered_cached_balance_is_named(api: Api, database_url: str) -> None:
    alice, _ = activity(api)
    key = ledger.user_key(alice, "cash")
    execute(
        api, "UPDATE ledger_accounts SET credits_posted = credits_posted + 1 WHERE key = :k", k=key
    )

    payload = as_json(database_url, 1)
    assert payload["balanced"] is False
    assert [p for p in payload["problems"] if key in p], payload["problems"]
    result = verify(url=database_url)
    assert result.exit_code == 1
    assert result.stdout.startswith("ledger: NOT BALANCED\n")
    assert key in result.stdout


def test_a_transfer_the_balances_never_saw(api: Api, database_url: str) -> None:
    """A transfer row inserted behind the ledger's back: both accounts' totals disagree."""
    alice, _ = activity(api)
    cash, revenue = ledger.user_key(alice, "cash"), ledger.platform_key("revenue")
    execute(
        api,
        "INSERT INTO ledger_transfers "
        "(id, debit_account_id, credit_account_id, amount, currency, kind, created_at) "
        "SELECT 'forged', d.id, c.id, 1000000, 'CNY', 'usage', :now "
        "FROM ledger_accounts d, ledger_accounts c WHERE d.key = :d AND c.key = :c",
        d=cash,
        c=revenue,
        now=api.clock.now(),
    )
    payload = as_json(database_url, 1)
    named = " ".join(payload["problems"])
    assert cash in named and revenue in named, payload["problems"]


def test_transfers_between_money_and_card_time_are_named_even_when_each_unit_sums(
    api: Api, database_url: str
) -> None:
    """1.00 CNY of cash into the card-time pool and on to revenue: totals kept consistent and
    each unit's debits equal its credits, yet money became card time and back."""
    alice, _ = activity(api)
    cash, pool = ledger.user_key(alice, "cash"), ledger.platform_key("grant_hours_pool")
    revenue = ledger.platform_key("revenue")
    for n, (d, c) in enumerate(((cash, pool), (pool, revenue))):
        execute(
            api,
            "INSERT INTO ledger_transfers "
            "(id, debit_account_id, credit_account_id, amount, currency, kind, created_at) "
            "SELECT :id, d.id, c.id, 1000000, 'CNY', 'usage', :now "
            "FROM ledger_accounts d, ledger_accounts c WHERE d.key = :d AND c.key = :c",
            id=f"forged-{n}",
            d=d,
            c=c,
            now=api.clock.now(),
        )
        execute(
            api,
            "UPDATE ledger_accounts SET debits_posted = debits_posted + 1000000 WHERE key = :k",
            k=d,
        )
        execute(
            api,
            "UPDATE ledger_accounts SET credits_posted = credits_posted + 1000000 WHERE key = :k",
            k=c,
        )
    payload = as_json(database_url, 1)
    assert sorted(payload["problems"]) == [
        "transfer forged-0 moves between units",
        "transfer forged-1 moves between units",
    ], payload["problems"]


def test_overspent_credit_is_a_violation(api: Api, database_url: str) -> None:
    """Consistent totals, but trial credit spent past zero: the invariant itself is broken."""
    _, bob = activity(api)
    with transaction(api.platform.sessions) as s:
        find = "SELECT key FROM ledger_accounts WHERE owner_id = :u AND kind = 'trial_credit'"
        trial = s.execute(text(find), {"u": bob}).scalar_one()
    revenue = ledger.platform_key("revenue")
    amount = 20_000_000  # more than the 10.00 of trial credit bob ever had
    execute(
        api,
        "INSERT INTO ledger_transfers "
        "(id, debit_account_id, credit_account_id, amount, currency, kind, created_at) "
        "SELECT 'overspend', d.id, c.id, :a, 'CNY', 'usage', :now "
        "FROM ledger_accounts d, ledger_accounts c WHERE d.key = :d AND c.key = :c",
        a=amount,
        d=trial,
        c=revenue,
        now=api.clock.now(),
    )
    add = "UPDATE ledger_accounts SET {0} = {0} + :a WHERE key = :k"
    execute(api, add.format("debits_posted"), a=amount, k=trial)
    execute(api, add.format("credits_posted"), a=amount, k=revenue)

    payload = as_json(database_url, 1)
    assert [p for p in payload["problems"] if trial in p], payload["problems"]
    assert not [p for p in payload["problems"] if "cached" in p], payload["problems"]


def test_data_dir_names_the_servers_sqlite(tmp_path: Path) -> None:
    data = tmp_path / "data"
    platform = Platform(Settings(data_dir=data), clock=ManualClock())
    try:
        platform.bootstrap_admin()  # an account, its trial credit: the ledger is not empty
    finally:
        platform.stop()
    result = verify("--data-dir", str(data), url=None)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ledger: balanced\n")
    assert "transfers: 0" not in result.stdout


def test_a_missing_data_dir_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = verify("--data-dir", str(missing), "--json", url=None)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: not_found: "), result.stderr
    assert str(missing / "cardhour.db") in lines[0]
    assert not missing.exists()


def test_a_database_without_the_schema_is_refused(empty_database_url: str) -> None:
    """SQLite: the file is not there; PostgreSQL: an empty database. Neither gets migrated."""
    result = verify(url=empty_database_url)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: not_found: "), result.stderr
    if empty_database_url.startswith("sqlite"):
        assert not Path(empty_database_url.removeprefix("sqlite:///")).exists()
        return
    from sqlalchemy import create_engine, inspect

    from cardhour.db.engine import normalise_url

    engine = create_engine(normalise_url(empty_database_url))
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_an_empty_sqlite_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cardhour.db").touch()
    result = verify("--data-dir", str(tmp_path), url=None)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: not_found: the database has no cardhour schema")


def test_an_unreachable_postgresql_is_one_line() -> None:
    result = verify(url="postgresql://nobody@127.0.0.1:1/none")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid_input: cannot open database")
