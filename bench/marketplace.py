"""`make bench-marketplace`: what the marketplace gateway adds to a call, against calling the
replica directly, in the same run; target ≤ 5 ms added at p99 on loopback.

A platform serves its REST API over real HTTP (uvicorn on 127.0.0.1, as `cardhour up` does); a
developer publishes a tiny app (it echoes its input), the operator lists it, a caller with
enough cash calls it. One warm-up call starts the replica. Then `--calls` pairs (1,000),
interleaved: the same JSON input once through the gateway (`POST /api/v1/apps/SLUG/invoke`: the
API key checked, the app, version and balance read in one transaction, the replica called, the
charge and the 70/30 split posted in a second transaction) and once straight to the replica's
port. Both over one keep-alive httpx client each. Reports p50/p99 of both and of the
difference of the percentiles. Checks: every call answered 200, the caller charged once per
gateway call, `ledger.verify` balanced.

SQLite, and PostgreSQL when `CARDHOUR_TEST_PG_URL` is set (`scripts/with-postgres.sh` sets it).
Prints a table and writes docs/benchmarks/marketplace.md above its notes marker. Exit 1 when a
check fails or a database misses the target.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import functools
import io
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from billing import commit, header, keep_notes, machine, md_table, text_table
from billing_setup import fresh_database

from cardhour.api.app import create_app
from cardhour.core.money import Money
from cardhour.db.app_models import AppCallRow
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services import accounts, apps, ledger
from cardhour.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 5.0
NOTES_MARKER = "<!-- notes below are kept -->"
log = functools.partial(print, file=sys.stderr, flush=True)
MANIFEST = """
name: Echo
slug: echo
category: other
description: Answers its input.
price_per_call: "0.01"
entrypoint: app:handle
input_schema: {type: object}
output_schema: {type: object}
scaling: {min_replicas: 0, max_replicas: 1, target_concurrency: 8, idle_seconds: 3600}
"""
CODE = "def handle(request):\n    return {'echo': request}\n"
INPUT = {"query": "what does the contract say about termination?", "top_k": 3}


def _package() -> str:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("app.py", CODE)
    return base64.b64encode(out.getvalue()).decode()


def _serve(platform: Platform) -> tuple[uvicorn.Server, threading.Thread, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(create_app(platform), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


def one_run(url: str, tmp: Path, calls: int) -> dict[str, Any]:
    settings = Settings(data_dir=tmp / f"data-{time.monotonic_ns()}", database_url=url)
    platform = Platform(settings)
    server, thread, base = _serve(platform)
    problems: list[str] = []
    try:
        api = httpx.Client(base_url=base, timeout=30)
        keys = {}
        for who in ("dev", "caller"):
            r = api.post(
                "/api/v1/auth/signup",
                json={"email": f"{who}@bench.example", "password": "password123"},
            )
            keys[who] = {"Authorization": f"Bearer {r.json()['api_key']}"}
        email, password = platform.bootstrap_admin()
        r = api.post("/api/v1/auth/login", json={"email": email, "password": password})
        admin = {"Authorization": f"Bearer {r.json()['api_key']}"}
        with transaction(platform.sessions) as s:
            caller = accounts.sign_in(s, "caller@bench.example", "password123")
            ledger.top_up(s, caller.id, Money.parse("1000"), platform.clock.now(), "bench")
        api.post(
            "/api/v1/apps", headers=keys["dev"], json={"manifest": MANIFEST, "code_b64": _package()}
        )
        api.post("/api/v1/apps/echo/submit", headers=keys["dev"])
        api.post("/api/v1/admin/apps/echo/approve", headers=admin, json={})
        warm = api.post("/api/v1/apps/echo/invoke", headers=keys["caller"], json=INPUT)
        if warm.status_code != 200:
            raise RuntimeError(f"warm-up call: {warm.status_code} {warm.text}")
        with transaction(platform.sessions) as s:
            app = apps.listed(s, "echo")
            key = f"{app.id}:{app.live_version}"
        port = platform.app_runtime.endpoint(key)
        assert port is not None, "the warm-up call left no replica"
        direct = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        via, straight = [], []
        for _ in range(calls):
            t0 = time.perf_counter()
            a = api.post("/api/v1/apps/echo/invoke", headers=keys["caller"], json=INPUT)
            t1 = time.perf_counter()
            b = direct.post("/invoke", json=INPUT)
            t2 = time.perf_counter()
            if a.status_code != 200 or b.status_code != 200:
                problems.append(f"status {a.status_code}/{b.status_code}")
                break
            via.append((t1 - t0) * 1000)
            straight.append((t2 - t1) * 1000)
        with transaction(platform.sessions) as s:
            charged = s.query(AppCallRow).count()
            if charged != calls + 1:
                problems.append(f"{charged} calls charged for {calls + 1}")
            if not ledger.verify(s).balanced:
                problems.append("ledger not balanced")
        direct.close()
        api.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        platform.stop()
    return {"via": via, "direct": straight, "problems": problems}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def measure(kind: str, pg_url: str | None, calls: int, tmp: Path) -> dict[str, Any]:
    with fresh_database(kind, pg_url, tmp) as url:
        run = one_run(url, tmp, calls)
    via, direct = run["via"], run["direct"]
    out = {"database": kind, "calls": len(via), "problems": run["problems"]}
    for name, values in (("via", via), ("direct", direct)):
        out[name] = {
            "p50": pct(values, 50),
            "p99": pct(values, 99),
            "mean": statistics.mean(values),
        }
    out["added_p50"] = out["via"]["p50"] - out["direct"]["p50"]
    out["added_p99"] = out["via"]["p99"] - out["direct"]["p99"]
    log(f"{kind}: gateway p50 {out['via']['p50']:.2f} ms p99 {out['via']['p99']:.2f} ms; direct "
        f"p50 {out['direct']['p50']:.2f} ms p99 {out['direct']['p99']:.2f} ms")  # fmt: skip
    return out


HEAD = ["database", "calls", "gateway p50", "gateway p99", "direct p50", "direct p99",
        "added p50", "added p99", "checks", "target"]  # fmt: skip


def rows(report: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["database"],
            str(r["calls"]),
            f"{r['via']['p50']:.2f} ms",
            f"{r['via']['p99']:.2f} ms",
            f"{r['direct']['p50']:.2f} ms",
            f"{r['direct']['p99']:.2f} ms",
            f"{r['added_p50']:.2f} ms",
            f"{r['added_p99']:.2f} ms",
            "ok" if not r["problems"] else "; ".join(r["problems"]),
            f"≤ {TARGET_MS:g} ms: " + ("pass" if r["added_p99"] <= TARGET_MS else "FAIL"),
        ]
        for r in report["results"]
    ]


def render_markdown(report: dict[str, Any]) -> str:
    parts = [
        *header("Marketplace gateway benchmark", "bench-marketplace", "marketplace.py", report),
        md_table(HEAD, rows(report)),
        "",
        f"{report['calls']:,} calls of a tiny app through the gateway (`POST "
        "/api/v1/apps/echo/invoke` over HTTP on loopback: API key, app, version and balance "
        "read, the replica called, the charge and the 70/30 split posted) interleaved with the "
        "same call straight to the replica's port; added = gateway percentile − direct "
        "percentile. One warm replica; one keep-alive client each.",
        "",
        NOTES_MARKER,
    ]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/marketplace.py", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=1000, help="gateway/direct pairs (1000)")
    p.add_argument("--no-write", dest="write", action="store_false", help="print only")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "marketplace.md")
    args = p.parse_args(argv)
    pg_url = os.environ.get("CARDHOUR_TEST_PG_URL")
    kinds = ["sqlite"] + (["postgresql"] if pg_url else [])
    host = machine(pg_url)
    with tempfile.TemporaryDirectory(prefix="cardhour-bench-marketplace-") as tmp:
        results = [measure(kind, pg_url, args.calls, Path(tmp)) for kind in kinds]
    report = {
        "command": "make bench-marketplace"
        + (f" BENCH_ARGS={shlex.quote(shlex.join(argv))}" if argv else ""),
        "machine": host,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "calls": args.calls,
        "results": results,
    }
    print(f"gateway overhead per call, {args.calls} calls")
    print(text_table(HEAD, rows(report)))
    if args.write:
        existing = args.out.read_text() if args.out.exists() else None
        args.out.write_text(keep_notes(render_markdown(report), existing))
        log(f"wrote {args.out}")
    slow = any(r["added_p99"] > TARGET_MS for r in results)
    return 1 if slow or any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
