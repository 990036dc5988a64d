"""The issue's check on a live `cardhour up`: after a while of real use (launches on demand and
on a monthly plan, a quote, a top-up, a price change, stop, start, down), `cardhour admin ledger
verify --json --data-dir D`, run next to the running server, reports a balanced ledger."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from tests.cli.test_cli import cli, ok, start_server, stop_server


def test_the_demo_ledger_verifies_balanced_while_it_runs(tmp_path: Path) -> None:
    srv = start_server(tmp_path, CARDHOUR_RECONCILERS__CHARGE_INTERVAL_SECONDS="1")
    data = tmp_path / "data"
    try:
        user, admin = tmp_path / "user.json", tmp_path / "admin.json"
        email = f"u{uuid.uuid4().hex[:8]}@example.com"
        ok(user, "signup", "--url", srv.url, "--email", email, "--password", "password123")
        password = (data / "admin-password").read_text().strip()
        admin_email = "admin@cardhour.local"
        ok(admin, "login", "--url", srv.url, "--email", admin_email, "--password", password)
        ok(admin, "admin", "topup", email, "500")
        quote = json.loads(ok(user, "quote", "--gpu", "H100:2", "--json"))
        ok(user, "launch", "--gpu", "H100:2", "--name", "q", "--quote", quote["id"])
        ok(user, "launch", "--gpu", "RTX4090:1", "--name", "m", "--plan", "monthly")
        ok(user, "launch", "--gpu", "A800:1", "--name", "a")
        time.sleep(3)
        ok(user, "stop", "a")
        ok(admin, "admin", "price", "H100", "2.50")
        time.sleep(2)
        ok(user, "start", "a")
        ok(user, "down", "q", "--yes")
        time.sleep(3)
        r = cli(user, "admin", "ledger", "verify", "--json", "--data-dir", str(data))
        assert r.returncode == 0, (r.stdout, r.stderr)
        report = json.loads(r.stdout)
        assert report["balanced"] is True and report["problems"] == []
        assert report["transfers"] >= 10  # trial, top-up, holds, plan, usage, releases
        balance = json.loads(ok(user, "balance", "--json"))
        assert balance["held"] != "0.00"  # the A800 restarted: one hour held again
    finally:
        stop_server(srv.proc)
