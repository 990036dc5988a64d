"""`make bench-agents`: 1,000 simulated host agents heartbeating against one control plane on
PostgreSQL; goal: heartbeat p99 ≤ 100 ms, and how many hosts one 2-core control plane holds at
a 10 s heartbeat.

The server: `cardhour up --backend hosts` as a subprocess (API, console and reconciler threads
in one process, as production runs it), on a fresh database of the throwaway PostgreSQL of
`scripts/with-postgres.sh`, with `hosts.heartbeat_seconds` = `--heartbeat` (10) and
`hosts.lost_after_seconds` 40, the demo apps off. The admin logs in (`POST /auth/login`),
enrols `--hosts` (1,000) hosts (`POST /admin/hosts`); each simulated agent joins with its token
(`POST /agent/join`) and sends its first report with its inventory (8 stand-in H100 from
`agent.inventory.standin`, as `cardhour agent --standin-gpus H100:8` sends), then reports as an
idle agent does (`agent/loop.py`): without the inventory, no containers, the next report as soon
as the last is answered, `?wait=<heartbeat>&since=<version>` (a long poll the server holds for
the whole wait, since nothing changes). A share of the agents (`--plain-share`, 10%) send plain
heartbeats instead (`wait=0`, one every heartbeat): what an agent converging containers sends.
Every agent reports once per heartbeat either way; their first steady report is spread evenly
over one heartbeat after their first report, as independent agents' are.

Measured over `--seconds` (60) starting `--settle` (3) heartbeats after the last agent's first
report (the join sends a thousand first reports in half a minute; agents answered together
come back together until the long polls' jittered ends spread them out: the steady state
starts after that), by the bench (the load generator: asyncio and a raw HTTP/1.1 client,
`raw_http`, in this process, on the same machine):
- long poll: the server's extra latency, the answer's time minus the time the server held it
  (`held_seconds`: the wait, less up to 1/16 of it);
- plain heartbeat: the answer's time;
- the server's CPU (utime + stime of its process in /proc, all threads) and PostgreSQL's (the
  postmaster with its reaped children and every live backend) over the window, in cores, and
  per report answered; the server's RSS; and the same CPU for `--idle-seconds` (5) before any
  host is enrolled (the idle control plane);
- the hosts one 2-core control plane (the server and its PostgreSQL on the same 2 cores) holds
  at a 10 s heartbeat: (2 cores × 0.7 − idle cores) ÷ (CPU-seconds per report × 0.1
  reports/s per host), linear in the hosts; 0.7: headroom for launches and bursts.
Checks: no answer other than 200 (and no connection error) from the first join to the end; no
long poll answered before its wait (nothing changed); every agent's reports less than
`lost_after_seconds` apart; at the end `GET /admin/hosts` has every host `ready`.

Prints a table and writes docs/benchmarks/agents.md above its notes marker, keeping the notes
below it (`--no-write`: print only). Exit 1 when a check fails or (without `--no-target`) a p99
misses 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import gc
import math
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from billing import commit, header, keep_notes, machine, md_table, text_table
from billing_setup import fresh_database
from raw_http import RawClient, RawHTTPError
from sqlalchemy import create_engine, text

from cardhour.agent import inventory
from cardhour.api.routers.hosts.watch import JITTER
from cardhour.runtime import cdi

ROOT = Path(__file__).resolve().parents[1]
GOAL_P99_MS = 100.0
CORES, HEADROOM, CAPACITY_HEARTBEAT_S = 2, 0.7, 10.0
LOST_AFTER_S = 40
GPUS = "H100:8"
NOTES_MARKER = "<!-- notes below are kept -->"
CLK_TCK = os.sysconf("SC_CLK_TCK")
log = functools.partial(print, file=sys.stderr, flush=True)

# `standin` reads and validates the demo fleet file twice per call (~40 ms): once per process
# is enough for the bench's 1,000 inventories (bench-side only; the agent calls it once).
inventory.load_catalog = functools.lru_cache(maxsize=None)(inventory.load_catalog)  # type: ignore[assignment]


# ---------------------------------------------------------------- /proc


def _stat(pid: int | str) -> list[str]:
    """/proc/<pid>/stat's fields from the 3rd (state) on: index 1 ppid, 11 utime, 12 stime,
    13 cutime, 14 cstime (clock ticks)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float:
    """CPU-seconds a process has used, all its threads."""
    f = _stat(pid)
    return (int(f[11]) + int(f[12])) / CLK_TCK


def postgres_cpu(postmaster: int) -> float:
    """CPU-seconds of a PostgreSQL server: the postmaster with its reaped children (backends
    that exited) and every live child (backends, checkpointer, walwriter...)."""
    f = _stat(postmaster)
    total = sum(int(x) for x in f[11:15])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            child = _stat(entry.name)
            if int(child[1]) == postmaster:
                total += int(child[11]) + int(child[12])
    return total / CLK_TCK


def postmaster_pid(url: str) -> int:
    """The postmaster's pid: the parent of the server's checkpointer."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            query = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
            checkpointer = conn.execute(text(query)).scalar_one()
    finally:
        engine.dispose()
    return int(_stat(checkpointer)[1])


def memory_kb(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


@dataclass
class Meter:
    """CPU-seconds of the server, its PostgreSQL and this process, read together."""

    server: int
    postmaster: int | None

    def read(self) -> tuple[float, float, float | None, float]:
        pg = postgres_cpu(self.postmaster) if self.postmaster else None
        return time.perf_counter(), process_cpu(self.server), pg, time.process_time()

    @staticmethod
    def cores(before: tuple[Any, ...], after: tuple[Any, ...]) -> dict[str, float | None]:
        wall = after[0] - before[0]
        pg = (after[2] - before[2]) / wall if before[2] is not None else None
        return {
            "wall_s": wall,
            "server": (after[1] - before[1]) / wall,
            "postgres": pg,
            "bench": (after[3] - before[3]) / wall,
        }


# ---------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(url: str, data_dir: Path, heartbeat: int, logfile: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "CARDHOUR_DATABASE_URL": url,
        "CARDHOUR_MARKETPLACE__DEMO_APPS": "false",
        "CARDHOUR_HOSTS__HEARTBEAT_SECONDS": str(heartbeat),
        "CARDHOUR_HOSTS__LOST_AFTER_SECONDS": str(LOST_AFTER_S),
    }
    env.pop("CARDHOUR_ADMIN_PASSWORD", None)
    command = [str(Path(sys.executable).parent / "cardhour"), "up", "--backend", "hosts"]
    command += ["--port", str(free_port()), "--data-dir", str(data_dir)]
    with logfile.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_up(proc: subprocess.Popen, logfile: Path, timeout: float = 300) -> tuple[str, str]:
    """(URL, admin email) once the banner's `cardhour is up at URL` is out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = logfile.read_text(errors="replace").splitlines()
        up = [line for line in lines if line.startswith("cardhour is up at ")]
        admin = [line.split()[1] for line in lines if line.strip().startswith("admin ")]
        if up and admin:
            return up[0].split()[-1], admin[0]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-20:])
    raise RuntimeError(f"the server did not come up (exit {proc.poll()}):\n{tail}")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM; after 2 s a SIGINT too (uvicorn then stops without waiting for the long polls
    it still holds, up to a heartbeat: the bench's agents are gone); SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            proc.wait(timeout=2 if sig == signal.SIGINT else 30)
            return
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
    proc.wait()


# ---------------------------------------------------------------- the agents


@dataclass
class Agent:
    name: str
    inventory: dict[str, Any]
    plain: bool
    offset: float  # its first steady report this long after its first report
    token: str = ""
    last_sent: float | None = None
    max_gap: float = 0.0


@dataclass
class Record:
    """Every answer: (kind, sent, answered, status, seconds the server held it); the errors by
    kind and first line."""

    samples: list[tuple[str, float, float, int, float]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    early: int = 0  # long polls answered before their wait, less the server's jitter
    moved: int = 0  # answers with another version than the agent held
    failed_at: list[float] = field(default_factory=list)  # when each failed call was sent

    def error(self, what: str, sent: float | None = None) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1
        if sent is not None:
            self.failed_at.append(sent)


async def call(
    client: RawClient,
    rec: Record,
    kind: str,
    path: str,
    body: dict[str, Any],
    agent: Agent | None = None,
    **kw: Any,
) -> dict[str, Any] | None:
    sent = time.perf_counter()
    if agent is not None:
        if agent.last_sent is not None:
            agent.max_gap = max(agent.max_gap, sent - agent.last_sent)
        agent.last_sent = sent
    try:
        response = await client.post(path, json=body, **kw)
    except RawHTTPError as exc:
        rec.samples.append((kind, sent, time.perf_counter(), 0, 0.0))
        rec.error(f"{kind}: {type(exc).__name__} {str(exc)[:80]}".rstrip(), sent)
        return None
    done = time.perf_counter()
    if response.status_code != 200:
        rec.samples.append((kind, sent, done, response.status_code, 0.0))
        rec.error(f"{kind}: {response.status_code} {response.text[:120]}", sent)
        return None
    answer: dict[str, Any] = response.json()
    rec.samples.append((kind, sent, done, 200, float(answer.get("held_seconds", 0.0))))
    return answer


async def first_report(
    agent: Agent, client: RawClient, rec: Record
) -> tuple[dict[str, Any], dict[str, str], int] | None:
    """Join with the token, send the first report (with the inventory): (the steady report's
    body, the credential's header, the version), or None on an error."""
    joined = await call(client, rec, "join", "/api/v1/agent/join", {"token": agent.token})
    if joined is None:
        return None
    auth = {"Authorization": f"Bearer {joined['credential']}"}
    body: dict[str, Any] = {
        "host": agent.name,
        "inventory": agent.inventory,
        "address": "127.0.0.1",
        "runtime": "podman",
        "standin": True,
        "containers": [],
    }
    path, params = "/api/v1/agent/report", {"wait": 0}
    answer = await call(client, rec, "first", path, body, agent, params=params, headers=auth)
    if answer is None:
        return None
    del body["inventory"]  # sent once, as the agent does while it does not change
    return body, auth, int(answer["version"])


async def run_agent(
    agent: Agent,
    connect: Callable[[], RawClient],
    rec: Record,
    heartbeat: float,
    gate: asyncio.Semaphore,
    first_done: list[float],
) -> None:
    """Join, the first report (with the inventory), then report forever as an idle agent, on
    its own connection (`connect()`: a client of its own, as each agent is)."""
    async with connect() as client:
        try:
            async with gate:
                first = await first_report(agent, client, rec)
        finally:
            first_done.append(time.perf_counter())
        if first is not None:
            await report_forever(agent, client, rec, heartbeat, *first)


async def report_forever(
    agent: Agent,
    client: RawClient,
    rec: Record,
    heartbeat: float,
    body: dict[str, Any],
    auth: dict[str, str],
    version: int,
) -> None:
    """An idle agent's reports: long polls (or plain heartbeats, one per heartbeat), from its
    offset on; until cancelled."""
    path = "/api/v1/agent/report"
    await asyncio.sleep(agent.offset)
    while True:
        sent = time.perf_counter()
        if agent.plain:
            params: dict[str, float] = {"wait": 0}
        else:
            params = {"wait": heartbeat, "since": version}
        kind = "plain" if agent.plain else "poll"
        answer = await call(client, rec, kind, path, body, agent, params=params, headers=auth)
        if answer is not None and answer["version"] != version:
            rec.moved += 1
            version = answer["version"]
        if agent.plain:  # the next heartbeat on its turn
            await asyncio.sleep(max(0.0, sent + heartbeat - time.perf_counter()))
        elif answer is None:
            await asyncio.sleep(1.0)  # the agent's first backoff step
        elif time.perf_counter() - sent < heartbeat * (1 - JITTER) - 0.01:
            rec.early += 1


async def loop_lag(out: list[float], every: float = 0.05) -> None:
    """How late this process's event loop wakes: > a few ms means the bench lags."""
    while True:
        started = time.perf_counter()
        await asyncio.sleep(every)
        out.append(time.perf_counter() - started - every)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latency(values: list[float]) -> dict[str, float]:
    ms = [1000 * v for v in values]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms) if ms else math.nan,
    }


async def enrol(client: httpx.AsyncClient, rec: Record, agents: list[Agent]) -> None:
    gate = asyncio.Semaphore(16)

    async def one(agent: Agent) -> None:
        async with gate:
            body = {"name": agent.name, "data_centre": "bj1"}
            response = await client.post("/api/v1/admin/hosts", json=body)
        if response.status_code != 201:
            rec.error(f"enrol: {response.status_code} {response.text[:120]}")
            return
        agent.token = response.json()["token"]

    await asyncio.gather(*(one(a) for a in agents))


def logged_errors(logfile: Path) -> list[str]:
    """The exceptions in the server's log: each traceback's last line."""
    lines = logfile.read_text(errors="replace").splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                j += 1
            found.append(lines[j] if j < len(lines) else line)
    return found


async def drive(
    url: str, email: str, password: str, meter: Meter, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    rec, lags = Record(), []

    # One connection per agent, as each agent has its own: a raw HTTP/1.1 client
    # (`raw_http.RawClient`), whose cost to this event loop is a fraction of httpx's (this
    # loop's own lateness counts in every latency measured). Idle connections are dropped
    # after 4 s, before uvicorn's keep-alive timeout (5 s) closes them: a request sent on a
    # connection idle for just under 5 s (an agent's first steady report after its offset)
    # could meet the server closing it.
    def connect() -> RawClient:
        return RawClient(url, timeout=args.heartbeat + 30.0, keepalive=4.0)

    async with httpx.AsyncClient(base_url=url, timeout=120.0) as operator:
        login = await operator.post(
            "/api/v1/auth/login", json={"email": email, "password": password}
        )
        login.raise_for_status()
        operator.headers["Authorization"] = f"Bearer {login.json()['api_key']}"
        lag_task = asyncio.create_task(loop_lag(lags))

        log(f"idle control plane for {args.idle_seconds:g} s")
        before = meter.read()
        await asyncio.sleep(args.idle_seconds)
        idle = Meter.cores(before, meter.read())

        agents = make_agents(args, tmp)
        started = time.perf_counter()
        await enrol(operator, rec, agents)
        enrol_s = time.perf_counter() - started
        log(f"enrolled {len(agents)} hosts in {enrol_s:.1f} s; joining")

        first_done: list[float] = []
        gate = asyncio.Semaphore(32)
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(run_agent(a, connect, rec, args.heartbeat, gate, first_done))
            for a in agents
            if a.token
        ]
        while len(first_done) < len(tasks):
            await asyncio.sleep(0.05)
        join_s = time.perf_counter() - started
        # every agent in its loop, and the burst of the join (agents answered together come
        # back together) spread out by the long polls' jittered ends
        steady = first_done[-1] + args.settle * args.heartbeat
        log(
            f"joined and first reports in {join_s:.1f} s; measuring for {args.seconds:g} s "
            f"from {steady - time.perf_counter():.1f} s on"
        )
        # the agents' clients live to the end: out of this process's collector's sight (a
        # full collection walking them all stalled this loop 300 ms: late answers it charged
        # to the server, and a burst of agents coming back together); before the settling
        # heartbeats, which spread out the burst this collection makes
        gc.collect()
        gc.freeze()
        await asyncio.sleep(max(0.0, steady - time.perf_counter()))
        lags.clear()
        before = meter.read()
        window_start = before[0]
        await asyncio.sleep(args.seconds)
        after = meter.read()
        window_end = after[0]
        memory = memory_kb(meter.server)
        logged = logged_errors(tmp / "server.log")
        lag = list(lags)
        listed = await operator.get("/api/v1/admin/hosts")
        for task in [*tasks, lag_task]:
            task.cancel()
        await asyncio.gather(*tasks, lag_task, return_exceptions=True)

    hosts = listed.json() if listed.status_code == 200 else []
    if listed.status_code != 200:
        rec.error(f"list hosts: {listed.status_code} {listed.text[:120]}")
    states: dict[str, int] = {}
    for host in hosts:
        states[host["state"]] = states.get(host["state"], 0) + 1
    inside = [s for s in rec.samples if window_start <= s[2] < window_end]
    polls = [
        done - sent - held for kind, sent, done, st, held in inside if kind == "poll" and st == 200
    ]
    plain = [done - sent for kind, sent, done, st, _ in inside if kind == "plain" and st == 200]
    reports = sum(1 for kind, *_ in inside if kind in ("poll", "plain"))
    cores = Meter.cores(before, after)
    return {
        "enrol_s": enrol_s,
        "join_s": join_s,
        "window_s": window_end - window_start,
        "reports": reports,
        "reports_per_s": reports / (window_end - window_start),
        "poll": latency(polls),
        "plain": latency(plain),
        "cores": cores,
        "idle": idle,
        "rss_mb": memory.get("VmRSS", 0) / 1024,
        "hwm_mb": memory.get("VmHWM", 0) / 1024,
        "lag_p99_ms": 1000 * percentile(lag, 0.99),
        "lag_max_ms": 1000 * max(lag) if lag else math.nan,
        "errors": rec.errors,
        "error_count": sum(rec.errors.values()),
        "logged": logged,
        "failed_at_s": [round(t - window_start, 1) for t in rec.failed_at[:20]],
        "early": rec.early,
        "moved": rec.moved,
        "max_gap_s": max((a.max_gap for a in agents), default=0.0),
        "states": states,
        "listed": len(hosts),
    }


def make_agents(args: argparse.Namespace, tmp: Path) -> list[Agent]:
    """Each host's first-report inventory (8 stand-in H100, UUIDs from its name); every
    `1 / plain_share`-th agent plain; first steady reports spread over one heartbeat."""
    every = round(1 / args.plain_share) if args.plain_share > 0 else 0
    state = tmp / "agent-state"
    agents = []
    for i in range(args.hosts):
        name = f"bench-h{i:05d}"
        found = inventory.standin(GPUS, name, state, cdi.standin_kind(name))
        plain = bool(every) and i % every == every - 1
        offset = args.heartbeat * ((i * 0.618034) % 1.0)
        agents.append(Agent(name, found.report, plain, offset))
    return agents


# ---------------------------------------------------------------- figures (pure)


def capacity(
    cores: float, idle: float, reports_per_s: float, budget: float = CORES
) -> tuple[float, float]:
    """(CPU-seconds per report, hosts at a 10 s heartbeat within `budget` cores × 0.7)."""
    per_report = max(cores - idle, 0.0) / reports_per_s if reports_per_s else math.nan
    if not per_report or math.isnan(per_report):
        return per_report, math.nan
    return per_report, (budget * HEADROOM - idle) / (per_report / CAPACITY_HEARTBEAT_S)


def figures(r: dict[str, Any]) -> dict[str, Any]:
    """Hosts per 2-core control plane: the server with its PostgreSQL on the 2 cores, the
    server alone on them, and the server within the one core its Python (one process, one
    GIL) can use."""
    c, idle, rate = r["cores"], r["idle"], r["reports_per_s"]
    both = None
    if c["postgres"] is not None:
        both = capacity(c["server"] + c["postgres"], idle["server"] + idle["postgres"], rate)
    return {
        "server": capacity(c["server"], idle["server"], rate),
        "both": both,
        "one_core": capacity(c["server"], idle["server"], rate, budget=1),
    }


def goal_met(r: dict[str, Any]) -> bool:
    return all(r[k]["n"] and r[k]["p99_ms"] <= GOAL_P99_MS for k in ("poll", "plain"))


def problems(r: dict[str, Any], hosts: int) -> list[str]:
    found = []
    if r["error_count"]:
        found.append(
            f"{r['error_count']} errors: {r['errors']} (sent at {r['failed_at_s']} s of the window)"
        )
    if r["states"].get("ready", 0) != hosts:
        found.append(f"hosts at the end: {r['states']} of {hosts}")
    if r["logged"]:
        found.append(f"{len(r['logged'])} exceptions in the server's log: {r['logged'][:3]}")
    if r["early"]:
        found.append(f"{r['early']} long polls answered before their wait")
    if r["moved"]:
        found.append(f"{r['moved']} answers with a new version")
    if r["max_gap_s"] >= LOST_AFTER_S:
        found.append(
            f"an agent's reports {r['max_gap_s']:.1f} s apart (lost after {LOST_AFTER_S} s)"
        )
    if not r["poll"]["n"]:
        found.append("no long poll answered in the window")
    return found


def _ms(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f} ms"


def _count(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.0f}"


def spread(found: dict[str, float]) -> str:
    return (
        f"{_ms(found['p50_ms'])} / {_ms(found['p99_ms'])} / {_ms(found['max_ms'])} ({found['n']:,})"
    )


HEAD = ["measure", "value"]


def rows(report: dict[str, Any]) -> list[list[str]]:
    r, a = report["result"], report["args"]
    c, idle, f = r["cores"], r["idle"], report["figures"]
    poll, plain = r["poll"], r["plain"]
    pg = c["postgres"]
    per_pg = pg / r["reports_per_s"] if pg is not None and r["reports_per_s"] else math.nan
    goal = f"p99 ≤ {GOAL_P99_MS:g} ms (both): " + ("pass" if goal_met(r) else "miss")
    out = [
        [
            "agents",
            f"{a['hosts']:,} ({a['hosts'] - report['plain_agents']:,} long-polling, "
            f"{report['plain_agents']:,} plain), heartbeat {a['heartbeat']} s",
        ],
        [
            "reports answered in the window",
            f"{r['reports']:,} in {r['window_s']:.1f} s: {r['reports_per_s']:.1f}/s "
            f"(the agents offer {a['hosts'] / a['heartbeat']:.1f}/s)",
        ],
        [
            "long poll: answer − wait, p50 / p99 / max",
            spread(poll),
        ],
        [
            "plain heartbeat: answer, p50 / p99 / max",
            spread(plain),
        ],
        [
            "server CPU (cardhour process)",
            f"{c['server']:.3f} cores ({1000 * f['server'][0]:.2f} ms per report over idle); "
            f"idle {idle['server']:.3f} cores",
        ],
        [
            "PostgreSQL CPU",
            "-"
            if pg is None
            else f"{pg:.3f} cores ({1000 * per_pg:.2f} ms per report); "
            f"idle {idle['postgres']:.3f} cores",
        ],
        ["server RSS at the end (peak)", f"{r['rss_mb']:.0f} MB ({r['hwm_mb']:.0f} MB)"],
        [
            "hosts per 2-core control plane, 10 s heartbeat",
            (f"{_count(f['both'][1])} (server + PostgreSQL); " if f["both"] else "")
            + f"{_count(f['server'][1])} (server alone); {_count(f['one_core'][1])} (server "
            "in one core: one process, one GIL)",
        ],
        [
            "load generator (this bench)",
            f"{c['bench']:.3f} cores; event loop late p99 {r['lag_p99_ms']:.1f} ms, "
            f"max {r['lag_max_ms']:.1f} ms",
        ],
        [
            "errors / early long polls / new versions / exceptions logged",
            f"{r['error_count']} / {r['early']} / {r['moved']} / {len(r['logged'])}",
        ],
        [
            "longest gap between an agent's reports",
            f"{r['max_gap_s']:.1f} s (lost after {LOST_AFTER_S} s)",
        ],
        [
            "hosts at the end (GET /admin/hosts)",
            ", ".join(f"{n:,} {s}" for s, n in sorted(r["states"].items())) or "none",
        ],
        [
            "set-up",
            f"enrolled in {r['enrol_s']:.1f} s; joined + first reports in {r['join_s']:.1f} s",
        ],
        ["checks", "ok" if not report["problems"] else "; ".join(report["problems"])],
        ["goal", goal],
    ]
    return out


FORMULA = (
    f"hosts = ({CORES} cores × {HEADROOM:g} − idle cores) ÷ (CPU-seconds per report × "
    f"{1 / CAPACITY_HEARTBEAT_S:g} reports/s per host); CPU-seconds per report = (cores used − "
    "idle cores) ÷ reports/s"
)


def plain_text(report: dict[str, Any]) -> str:
    if not report["plain_every"]:
        return "no agent sends plain heartbeats"
    return (
        f"one agent in {report['plain_every']} sends plain heartbeats instead (`wait=0`, one "
        "per heartbeat)"
    )


def render_markdown(report: dict[str, Any]) -> str:
    a = report["args"]
    parts = [
        *header("Host agents benchmark", "bench-agents", "agents.py", report),
        md_table(HEAD, rows(report)),
        "",
        f"Hosts per 2-core control plane: {FORMULA}; linear in the hosts, 0.7 leaving room "
        'for launches and bursts. "Server + PostgreSQL": the control plane with its '
        'database on the same 2 cores (as on this machine); "server alone": only the '
        'cardhour process counted (PostgreSQL elsewhere); "server in one core": the same with '
        "1 core instead of 2, since `cardhour up` is one Python process whose Python code runs "
        "on one core at a time (the GIL).",
        "",
        f"`cardhour up --backend hosts` (one process: API, console, reconciler threads) on a "
        f"fresh database of the throwaway PostgreSQL, heartbeat {a['heartbeat']} s, hosts lost "
        f"after {LOST_AFTER_S} s. {a['hosts']:,} simulated agents (asyncio and a raw HTTP/1.1 "
        "client in the bench's process, on the same machine) join with a token each, send a "
        "first report with 8 stand-in H100 (`agent.inventory.standin`: GPUs, modelled `topo -m` "
        "and `ibstat`, CPUs, memory, disk), then report as an idle agent does: "
        "no inventory, no containers, the next report when the last is answered, long-polling "
        f"with `?wait={a['heartbeat']}&since=<version>`, which the server holds for the wait "
        f"less up to 1/16 of it, at random; {plain_text(report)}. Every agent's first steady "
        "report is spread over one heartbeat. "
        f"Measured over {a['seconds']:g} s from {a['settle']} heartbeats after the last first "
        "report: long poll: the answer's time at the client minus the time the server held it; "
        "plain heartbeat: the "
        "answer's time; CPU from /proc (the server process, all threads; PostgreSQL: the "
        "postmaster, its reaped and live children) over the window, and over "
        f"{a['idle_seconds']:g} s before any host was enrolled (idle). Checks: only 200 "
        "answers, no long poll answered early, no agent's reports 40 s apart, every host "
        "`ready` at the end.",
        "",
        NOTES_MARKER,
    ]
    return "\n".join(parts) + "\n"


def render_console(report: dict[str, Any]) -> str:
    return text_table(HEAD, rows(report)) + "\n" + FORMULA + "\n"


# ---------------------------------------------------------------- running


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/agents.py", description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=1000, help="simulated agents (1,000)")
    p.add_argument("--seconds", type=float, default=60.0, help="measured steady phase (60)")
    p.add_argument("--heartbeat", type=int, default=10, help="hosts.heartbeat_seconds (10)")
    p.add_argument(
        "--settle", type=int, default=3, help="heartbeats from the last join to the window (3)"
    )
    p.add_argument(
        "--plain-share", type=float, default=0.1, help="agents on plain heartbeats (0.1)"
    )
    p.add_argument("--idle-seconds", type=float, default=5.0, help="idle CPU before enrolling (5)")
    p.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    p.add_argument("--no-write", dest="write", action="store_false", help="print only")
    p.add_argument("--no-target", dest="target", action="store_false", help="exit 0 on a miss")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "agents.md")
    args = p.parse_args(argv)
    args.pg_url = os.environ.get("CARDHOUR_TEST_PG_URL")
    if args.database == "postgresql" and not args.pg_url:
        p.error("CARDHOUR_TEST_PG_URL is not set: run under scripts/with-postgres.sh")
    if args.hosts < 1 or args.seconds <= 0 or args.heartbeat < 1:
        p.error("--hosts, --seconds and --heartbeat must be positive")
    if not 0 <= args.plain_share < 1:
        p.error("--plain-share is in [0, 1)")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    pg = args.pg_url if args.database == "postgresql" else None
    host = machine(pg)
    with tempfile.TemporaryDirectory(prefix="cardhour-bench-agents-") as tmp_name:
        tmp = Path(tmp_name)
        with fresh_database(args.database, args.pg_url, tmp) as url:
            logfile = tmp / "server.log"
            proc = start_server(url, tmp / "data", args.heartbeat, logfile)
            try:
                base, email = wait_up(proc, logfile)
                password = (tmp / "data" / "admin-password").read_text().strip()
                meter = Meter(proc.pid, postmaster_pid(pg) if pg else None)
                result = asyncio.run(drive(base, email, password, meter, args, tmp))
            finally:
                stopping = time.perf_counter()
                stop_server(proc)
                log(f"server stopped in {time.perf_counter() - stopping:.1f} s")
                if proc.returncode not in (0, None) and proc.returncode != -signal.SIGTERM:
                    log(logfile.read_text(errors="replace")[-3000:])
    every = round(1 / args.plain_share) if args.plain_share > 0 else 0
    report: dict[str, Any] = {
        "command": "make bench-agents"
        + (f" BENCH_ARGS={shlex.quote(shlex.join(argv))}" if argv else ""),
        "machine": host,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "args": {
            k: getattr(args, k) for k in ("hosts", "seconds", "heartbeat", "settle", "idle_seconds")
        },
        "plain_every": every,
        "plain_agents": args.hosts // every if every else 0,
        "result": result,
    }
    report["figures"] = figures(result)
    report["problems"] = problems(result, args.hosts)
    sys.stdout.write(render_console(report))
    if args.write:
        existing = args.out.read_text() if args.out.exists() else None
        args.out.write_text(keep_notes(render_markdown(report), existing))
        log(f"wrote {args.out}")
    for line in report["problems"]:
        log(f"FAIL: {line}")
    missed = args.target and not goal_met(result)
    if missed:
        log(f"goal missed: p99 ≤ {GOAL_P99_MS:g} ms")
    return 1 if missed or report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
