"""`make bench-launch`: `POST /api/v1/instances` under 50 concurrent clients on PostgreSQL
against a 10,000-node (80,000-GPU) fleet; goal ≥ 200 accepted launches/s, p99 ≤ 100 ms, and no
GPU allocated twice or beyond its node once the reconcilers settle.

The fleet: the demo fleet file scaled to `--nodes` (10,000: bj1 40% H100 ×8 and 20% A800 ×8,
wh1 20% H100 ×8 and 20% RTX 4090 ×8 PCIe; 32 nodes per IB leaf), written by the bench, on the
`sim` backend with 0 s boot. The server: `--workers` API processes (4) and one reconciler
process (`bench/launch_server.py`), as production runs them, on a fresh PostgreSQL database
from `scripts/with-postgres.sh` per run. The load: `--clients` (50) users, each on one
keep-alive connection, launching for `--seconds` (20) 1, 2, 4 or 8 GPUs of each model, and every
40th a 2-node H100 cluster. Together they offer `--rate` launches/s (200, the goal: each client
sends its next launch on its turn, or when its last is answered if that is later; `--rate 0`:
back to back, the most the server takes). With 50 clients each waiting for its answer, a
server slower than the offered rate answers in about 50 ÷ its rate seconds (Little's law), so
p99 ≤ 100 ms at 200/s needs room to spare. Timed by the client: every request's latency from
its sending, the accepted (201) launches per second over the whole phase.

The same run is repeated with the pre-change path (`--paths new,old`): the API workers swap in
the old fit check, which loaded the whole fleet and placed the request on it
(`launch_server.FullPlacement`). After each load the API stops and the reconcilers settle (no
launch still waiting for its first scheduling cycle); then the checks, which must hold for both
paths: every accepted launch is an instance, placed (its GPUs allocated, exactly its count) or
pending with the scheduler's reason; no node holds an allocation beyond its GPUs; the ledger
balances. Prints a table and writes docs/benchmarks/launch.md above its notes marker
(`--no-write`: print only). Exit 1 when a check fails or (without `--no-target`) the new path
misses the goal.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from billing import commit, header, keep_notes, machine, md_table, text_table
from billing_setup import fresh_database
from launch_checks import check, settle, setup_users

from cardhour.settings import default_fleet_text

ROOT = Path(__file__).resolve().parents[1]
SERVER = Path(__file__).resolve().parent / "launch_server.py"
GOAL_RATE, GOAL_P99_MS = 200.0, 100.0
NOTES_MARKER = "<!-- notes below are kept -->"
SHARES = {("bj1", "h100"): 0.4, ("bj1", "a800"): 0.2, ("wh1", "h100"): 0.2, ("wh1", "rtx4090"): 0.2}
MIX = [
    {"gpu": "H100", "count": 1},
    {"gpu": "A800", "count": 2},
    {"gpu": "RTX4090", "count": 1},
    {"gpu": "H100", "count": 4},
    {"gpu": "A800", "count": 8},
    {"gpu": "H100", "count": 2},
    {"gpu": "RTX4090", "count": 4},
    {"gpu": "H100", "count": 8},
]
CLUSTER = {"gpu": "H100", "count": 8, "nodes": 2}
log = functools.partial(print, file=sys.stderr, flush=True)


def fleet_file(folder: Path, nodes: int) -> Path:
    raw = yaml.safe_load(default_fleet_text())
    groups = [(dc, g) for dc in raw["data_centres"] for g in dc["node_groups"]]
    counts = [max(1, int(nodes * SHARES[(dc["id"], g["prefix"])])) for dc, g in groups]
    counts[0] += nodes - sum(counts)
    for (_dc, group), count in zip(groups, counts, strict=True):
        group["count"] = count
        if group.get("ib_rails"):
            group["nodes_per_leaf"] = 32
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def body_of(client: int, n: int) -> bytes:
    shape = CLUSTER if n % 40 == 39 else MIX[(client + n) % len(MIX)]
    return json.dumps({**shape, "name": f"c{client}-{n}"}).encode()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 request on a kept-alive connection: (status, body, server closes)."""
    writer.write(data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length, close = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value)
        elif key == b"connection":
            close = value.strip().lower() == b"close"
    return status, await reader.readexactly(length), close


@dataclass
class Schedule:
    """When the clients launch: from `start` to `until`, client i at `start + every × (n + i /
    clients)` for its n-th launch, or as soon as its last is answered if that is later
    (`every` 0: always back to back)."""

    clients: int
    every: float
    start: float = 0.0
    until: float = 0.0
    go: asyncio.Event = field(default_factory=asyncio.Event)

    def turn(self, i: int, n: int) -> float:
        return self.start + self.every * (n + i / self.clients)


async def _client(i: int, key: str, port: int, plan: Schedule, out: list[Any]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await plan.go.wait()
    n = 0
    while time.perf_counter() < plan.until:
        if (wait := plan.turn(i, n) - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
            if time.perf_counter() >= plan.until:
                break
        body = body_of(i, n)
        head = (
            "POST /api/v1/instances HTTP/1.1\r\nHost: bench\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        started = time.perf_counter()
        status, payload, close = await _exchange(reader, writer, head + body)
        code = None if status == 201 else json.loads(payload).get("error", {}).get("code")
        out.append((started, time.perf_counter() - started, status, code))
        n += 1
        if close:
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()


async def load(keys: list[str], port: int, seconds: float, rate: float) -> dict[str, Any]:
    """The clients launch for `seconds`, together offering `rate` launches/s (0: each sends
    its next launch as soon as its last is answered); the numbers, client-side (a latency runs
    from the request's sending to its answer)."""
    plan = Schedule(len(keys), len(keys) / rate if rate else 0.0)
    out: list[Any] = []
    tasks = [asyncio.create_task(_client(i, k, port, plan, out)) for i, k in enumerate(keys)]
    await asyncio.sleep(0.5)  # connections open
    plan.start = time.perf_counter()
    plan.until = plan.start + seconds
    plan.go.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - plan.start
    latencies = sorted(latency for _, latency, _, _ in out)
    accepted = sum(1 for _, _, status, _ in out if status == 201)
    refused: dict[str, int] = {}
    for _, _, status, code in out:
        if status != 201:
            refused[f"{status} {code}"] = refused.get(f"{status} {code}", 0) + 1
    return {
        "requests": len(out),
        "accepted": accepted,
        "seconds": elapsed,
        "rate": accepted / elapsed,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0,
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        if latencies
        else 0.0,
        "refused": refused,
    }


def _spawn(role: str, url: str, fleet: Path, tmp: Path, name: str, *extra: str) -> tuple[Any, Path]:
    ready = tmp / f"{name}.ready"
    args = [sys.executable, str(SERVER), role, "--database", url, "--fleet", str(fleet)]
    args += ["--data-dir", str(tmp / name), "--ready", str(ready), *extra]
    env = {**os.environ, "PYTHONPATH": str(SERVER.parent)}
    return subprocess.Popen(args, env=env, stdout=sys.stderr), ready


def _stop(procs: list[Any]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(procs: list[tuple[Any, Path]], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not all(ready.exists() for _, ready in procs):
        if any(proc.poll() is not None for proc, _ in procs):
            raise RuntimeError("a server process exited before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError("the server processes were not ready in time")
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_run(path: str, url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    fleet = fleet_file(tmp, args.nodes)
    started = time.perf_counter()
    keys = setup_users(url, fleet, tmp / f"setup-{path}", args.clients)
    reconcilers = _spawn("reconcilers", url, fleet, tmp, f"rec-{path}")
    _wait_ready([reconcilers])  # first: its start syncs the nodes before the workers read them
    port = free_port()
    workers = [
        _spawn("api", url, fleet, tmp, f"api-{path}-{w}", "--port", str(port), "--path", path)
        for w in range(args.workers)
    ]
    procs = [proc for proc, _ in (reconcilers, *workers)]
    try:
        _wait_ready(workers)
        log(f"{path}: set up in {time.perf_counter() - started:.0f} s; load for {args.seconds} s")
        found = asyncio.run(load(keys, port, args.seconds, args.rate))
        _stop([proc for proc, _ in workers])
        log(f"{path}: {found['accepted']} accepted, {found['rate']:.1f}/s; settling")
        found["settle_s"] = settle(url, args.settle_timeout)
    finally:
        _stop(procs)
    return {"path": path, **found, **check(url, found["accepted"])}


def ratio(results: list[dict[str, Any]]) -> str:
    by = {r["path"]: r for r in results}
    if "new" not in by or "old" not in by or not by["old"]["rate"]:
        return "-"
    new, old = by["new"], by["old"]
    return (
        f"new ÷ old: {new['rate'] / old['rate']:.1f}× the accepted launches/s; old ÷ new "
        f"latency: {old['p50_ms'] / new['p50_ms']:.1f}× at p50, "
        f"{old['p99_ms'] / new['p99_ms']:.1f}× at p99"
    )


HEAD = [
    "path",
    "launches accepted",
    "launches/s",
    "p50",
    "p99",
    "refused",
    "settled in",
    "placed / pending (reason)",
    "over-allocated GPUs",
    "checks",
    "goal",
]


def goal_met(r: dict[str, Any]) -> bool:
    return r["rate"] >= GOAL_RATE and r["p99_ms"] <= GOAL_P99_MS


def rows(report: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in report["results"]:
        refused = ", ".join(f"{n} {why}" for why, n in r["refused"].items()) or "0"
        goal = f"≥ {GOAL_RATE:g}/s, p99 ≤ {GOAL_P99_MS:g} ms: "
        out.append(
            [
                r["path"],
                f"{r['accepted']:,} in {r['seconds']:.1f} s",
                f"{r['rate']:.1f}",
                f"{r['p50_ms']:.1f} ms",
                f"{r['p99_ms']:.1f} ms",
                refused,
                f"{r['settle_s']:.1f} s",
                f"{r['placed']:,} / {r['pending']:,}",
                str(r["over_allocated"]),
                "ok" if not r["problems"] else "; ".join(r["problems"]),
                goal + ("pass" if goal_met(r) else "miss") if r["path"] == "new" else "-",
            ]
        )
    return out


def offered(rate: float) -> str:
    if not rate:
        return "each client its next launch as soon as its last is answered"
    return (
        f"together offering {rate:g} launches/s (each client its next launch on its turn, or "
        "as soon as its last is answered if that is later)"
    )


def render_markdown(report: dict[str, Any]) -> str:
    a = report["args"]
    parts = [
        *header("Launch benchmark", "bench-launch", "launch.py", report),
        md_table(HEAD, rows(report)),
        "",
        report["ratio"] + ".",
        "",
        f"{a['clients']} concurrent clients (one user and one keep-alive connection each) "
        f"sending `POST /api/v1/instances` for {a['seconds']:g} s, {offered(a['rate'])}, to "
        f"{a['workers']} API worker processes (uvicorn, one `SO_REUSEPORT` socket each) and "
        f"one reconciler process, on {report['database']}, against a {a['nodes']:,}-node fleet "
        f"({a['nodes'] * 8:,} GPUs) on the `sim` backend; the bench's client runs on the same "
        "machine. new: the fit check answered by the capacity summary "
        "(`services/compute/capacity.py`); old: the same run with the pre-change check (the "
        "whole fleet loaded and the request placed on it per launch). launches/s: accepted "
        "(201) launches over the load phase; p50/p99: every request's latency at the client. "
        "Settled in: from the end of the load until no launch waits for its first scheduling "
        "cycle. Checks: every accepted launch is an instance, placed with exactly its GPUs or "
        "pending with the scheduler's reason; no node holds more GPUs than it has; "
        "`ledger.verify` balanced.",
        "",
        NOTES_MARKER,
    ]
    return "\n".join(parts) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/launch.py", description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=10_000, help="fleet size (10,000)")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (50)")
    p.add_argument("--seconds", type=float, default=20.0, help="load per path (20)")
    p.add_argument(
        "--rate",
        type=float,
        default=GOAL_RATE,
        help=f"launches/s the clients offer together ({GOAL_RATE:g}; 0: back to back)",
    )
    p.add_argument("--workers", type=int, default=4, help="API processes (4)")
    p.add_argument("--paths", default="new,old", help="comma list of new, old (new,old)")
    p.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    p.add_argument("--settle-timeout", type=float, default=600.0, help="seconds (600)")
    p.add_argument("--no-write", dest="write", action="store_false", help="print only")
    p.add_argument("--no-target", dest="target", action="store_false", help="exit 0 on a miss")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "launch.md")
    args = p.parse_args(argv)
    args.paths = [x.strip() for x in args.paths.split(",") if x.strip()]
    if set(args.paths) - {"new", "old"}:
        p.error("--paths takes new and old")
    args.pg_url = os.environ.get("CARDHOUR_TEST_PG_URL")
    if args.database == "postgresql" and not args.pg_url:
        p.error("CARDHOUR_TEST_PG_URL is not set: run under scripts/with-postgres.sh")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    host = machine(args.pg_url if args.database == "postgresql" else None)
    results = []
    with tempfile.TemporaryDirectory(prefix="cardhour-bench-launch-") as tmp:
        for path in args.paths:
            with fresh_database(args.database, args.pg_url, Path(tmp)) as url:
                results.append(one_run(path, url, args, Path(tmp)))
    report = {
        "command": "make bench-launch"
        + (f" BENCH_ARGS={shlex.quote(shlex.join(argv))}" if argv else ""),
        "machine": host,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "database": "PostgreSQL" if args.database == "postgresql" else "SQLite",
        "args": {k: getattr(args, k) for k in ("nodes", "clients", "seconds", "workers", "rate")},
        "results": results,
        "ratio": ratio(results),
    }
    print(f"POST /api/v1/instances, {args.clients} clients, {args.nodes:,} nodes:")
    print(offered(args.rate))
    print(text_table(HEAD, rows(report)))
    print(report["ratio"])
    if args.write:
        existing = args.out.read_text() if args.out.exists() else None
        args.out.write_text(keep_notes(render_markdown(report), existing))
        log(f"wrote {args.out}")
    missed = args.target and any(r["path"] == "new" and not goal_met(r) for r in results)
    return 1 if missed or any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
