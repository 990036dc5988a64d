"""`make bench-billing`: one metering pass over 10,000 running instances, ≤ 2 s on PostgreSQL.

Each run starts from fresh data, set up with bulk inserts in one transaction: 1,000 users, each
with a cash account funded by a real top-up transfer, and 10 instances each (H100, A800 and RTX
4090 at their demo price book prices, 1, 2, 4 or 8 GPUs) `running` since 90 s before the clock and
last charged then, each with the hold account a launch opens, holding one hour moved from cash by
a real transfer. Cached account totals are set to match, so `ledger.verify` is balanced before
the pass. Allocations are not created: metering never reads them.

Timed: one `platform.meter.step()`, the public metering pass (one transaction). Baseline, on
freshly set-up data too: the same charges one instance at a time, each in its own transaction,
through `metering.settle` (the per-instance path). Afterwards, for both: `ledger.verify` must be
balanced, and every instance's `billed_micros` must equal `rate_usage(price, usage)` for its 90 s.

Median of `--runs` (3) fresh runs per database; PostgreSQL from `CARDHOUR_TEST_PG_URL` (a fresh
database per run; `scripts/with-postgres.sh` provides one), SQLite in a temp dir for reference.
Prints a table and writes docs/benchmarks/billing.md above its notes marker, keeping the notes
below it (`--no-write`: print only). Exit 1 when a check fails or PostgreSQL misses the target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import platform as host_platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from billing_setup import PER_USER, RUNNING_FOR_S, fresh_database, make_platform, seed
from sqlalchemy import create_engine, func, select, text

from cardhour.core.money import Money, rate_usage
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, LedgerTransferRow
from cardhour.platform import Platform
from cardhour.services.billing import ledger, metering

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
NOTES_MARKER = "<!-- notes below are kept -->"
NOTES_DEFAULT = "## Notes\n\n(Nothing recorded yet.)\n"
log = functools.partial(print, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- timed work and checks


def transfer_count(platform: Platform) -> int:
    with transaction(platform.sessions) as s:
        return s.execute(select(func.count()).select_from(LedgerTransferRow)).scalar_one()


def metering_pass(platform: Platform) -> float:
    started = time.perf_counter()
    platform.meter.step()
    return time.perf_counter() - started


def per_instance(platform: Platform) -> float:
    """The baseline: each instance settled in its own transaction (row locked, as the pass does)."""
    with transaction(platform.sessions) as s:
        ids = list(s.scalars(select(InstanceRow.id).order_by(InstanceRow.id)))
    now = platform.clock.now()
    started = time.perf_counter()
    for instance_id in ids:
        with transaction(platform.sessions) as s:
            row = s.get(InstanceRow, instance_id, with_for_update=True)
            assert row is not None
            metering.settle(s, row, now)
    return time.perf_counter() - started


def check(platform: Platform) -> dict[str, Any]:
    """`ledger.verify`, and every instance billed exactly `rate_usage(price, usage)`."""
    with transaction(platform.sessions) as s:
        verified = ledger.verify(s)
        wrong = sum(1 for row in s.scalars(select(InstanceRow)) if not billed_exactly(row))
    return {"balanced": verified.balanced, "problems": verified.problems[:5], "misbilled": wrong}


def billed_exactly(row: InstanceRow) -> bool:
    """Seeded running for exactly `RUNNING_FOR_S` at one price (no boundary inside)."""
    usage = RUNNING_FOR_S * row.gpu_count * 1000
    return row.billed_micros == rate_usage(Money(row.price_micros, row.currency), usage).micros


def one_run(kind: str, mode: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Fresh database, seed, time `mode` ("pass" or "baseline"), check."""
    with fresh_database(kind, args.pg_url, tmp) as url:
        platform = make_platform(url, tmp)
        try:
            started = time.perf_counter()
            seed(platform, args.instances)
            setup_s = time.perf_counter() - started
            before_ok = check_ledger(platform)
            transfers = transfer_count(platform)
            seconds = metering_pass(platform) if mode == "pass" else per_instance(platform)
            posted = transfer_count(platform) - transfers
            return {
                "seconds": seconds,
                "setup_s": setup_s,
                "posted": posted,
                "balanced_before": before_ok,
                **check(platform),
            }
        finally:
            platform.stop()


def check_ledger(platform: Platform) -> bool:
    with transaction(platform.sessions) as s:
        return ledger.verify(s).balanced


def measure(kind: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"pass": [], "baseline": []}
    for i in range(args.runs):
        for mode in ("pass", "baseline") if args.baseline else ("pass",):
            runs[mode].append(one_run(kind, mode, args, tmp))
            log(f"{kind} run {i + 1}/{args.runs} {mode}: {runs[mode][-1]['seconds']:.3f} s")
    median = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items() if rs}
    every = [r for rs in runs.values() for r in rs]
    return {
        "database": kind,
        "instances": args.instances,
        "users": -(-args.instances // PER_USER),
        "pass_s": median["pass"],
        "pass_runs_s": [r["seconds"] for r in runs["pass"]],
        "transfers_posted": sorted({r["posted"] for r in runs["pass"]}),
        "baseline_s": median.get("baseline"),
        "baseline_transfers_posted": sorted({r["posted"] for r in runs["baseline"]}),
        "ratio": median["baseline"] / median["pass"] if "baseline" in median else None,
        "setup_s": statistics.median(r["setup_s"] for r in every),
        "balanced": all(r["balanced"] and r["balanced_before"] for r in every),
        "problems": [p for r in every for p in r["problems"]][:5],
        "misbilled": max(r["misbilled"] for r in every),
        "target": kind == "postgresql",
    }


# ---------------------------------------------------------------- rendering (pure)

HEAD = [
    "database",
    "instances",
    "transfers posted",
    "pass (median)",
    "runs",
    "per-instance baseline",
    "baseline ÷ pass",
    "ledger.verify",
    "billed = rate_usage",
    "target",
]


def verdict(row: dict[str, Any]) -> str:
    if not row["target"]:
        return "reference"
    return f"≤ {TARGET_S:g} s: " + ("pass" if row["pass_s"] <= TARGET_S else "FAIL")


def rows(report: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in report["results"]:
        base = r["baseline_s"]
        out.append(
            [
                r["database"],
                f"{r['instances']:,}",
                "/".join(f"{n:,}" for n in r["transfers_posted"]),
                f"{r['pass_s']:.3f} s",
                " ".join(f"{s:.3f}" for s in r["pass_runs_s"]),
                f"{base:.2f} s" if base is not None else "-",
                f"{r['ratio']:.1f}×" if r["ratio"] is not None else "-",
                "balanced" if r["balanced"] else "NOT BALANCED",
                "all" if r["misbilled"] == 0 else f"{r['misbilled']:,} wrong",
                verdict(r),
            ]
        )
    return out


def text_table(head: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *body]
    )


def md_table(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def render_console(report: dict[str, Any]) -> str:
    title = (
        f"one metering pass over {report['instances']:,} running instances "
        f"({PER_USER} per user), median of {report['runs']} fresh runs"
    )
    return title + "\n" + text_table(HEAD, rows(report)) + "\n"


def header(title: str, target: str, script: str, report: dict[str, Any]) -> list[str]:
    """The generated head of a benchmark page: title, how to reproduce, machine, date, commit
    (shared by the benches that write docs/benchmarks/)."""
    m = report["machine"]
    return [
        f"# {title}",
        "",
        f"Generated by `make {target}` (`bench/{script}`); do not edit above the marker "
        "line, the bench rewrites it. Notes go below the marker.",
        "",
        f"- Reproduce: `{report['command']}`",
        f"- Machine: {m['nproc']} CPUs (nproc), {m['cpu_model']}; Python {m['python']}; "
        f"PostgreSQL {m.get('postgresql') or '-'}; 1-min load average "
        f"{m['load_average']:.2f} when the bench started",
        f"- Date: {report['date']}; commit {report['commit']}",
        "",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    setup = ", ".join(f"{r['database']} {r['setup_s']:.1f} s" for r in report["results"])
    parts = [
        *header("Billing benchmark", "bench-billing", "billing.py", report),
        md_table(HEAD, rows(report)),
        "",
        f"Set-up: {report['instances']:,} instances `running` for {RUNNING_FOR_S} s, "
        f"{PER_USER} per user (H100/A800/RTX 4090 at the demo prices, 1/2/4/8 GPUs), each user "
        "funded by one top-up transfer and each instance holding one hour in its hold account "
        "(a transfer from cash, as a launch does), bulk-inserted in one transaction per run "
        f"(median {setup}). Pass: one `platform.meter.step()` (charge interval 60 s, so every "
        "instance is due). Baseline: the same charges, one instance per transaction through "
        "`metering.settle`. Every run starts from freshly set-up data; the pass and the baseline "
        "are checked alike: `ledger.verify` balanced before and after, and every "
        "`billed_micros == rate_usage(price, usage)`. PostgreSQL is the server from "
        "`scripts/with-postgres.sh` (fsync off); SQLite is for reference.",
        "",
        NOTES_MARKER,
    ]
    return "\n".join(parts) + "\n"


def keep_notes(generated: str, existing: str | None) -> str:
    """`generated` (ending with the marker) plus whatever followed the marker in `existing`."""
    notes = ""
    if existing and NOTES_MARKER in existing:
        notes = existing.split(NOTES_MARKER, 1)[1].lstrip("\n")
    return generated + "\n" + (notes or NOTES_DEFAULT)


# ---------------------------------------------------------------- running


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/billing.py", description=__doc__.split("\n")[0])
    p.add_argument("--instances", type=int, default=10_000, help="running instances (10,000)")
    p.add_argument("--runs", type=int, default=3, help="fresh runs per database (3)")
    p.add_argument(
        "--databases", default="postgresql,sqlite", help="comma list (postgresql,sqlite)"
    )
    p.add_argument("--no-baseline", dest="baseline", action="store_false")
    p.add_argument("--no-write", dest="write", action="store_false", help="print only")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "billing.md")
    args = p.parse_args(argv)
    args.databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    args.pg_url = os.environ.get("CARDHOUR_TEST_PG_URL")
    if unknown := set(args.databases) - {"postgresql", "sqlite"}:
        p.error(f"unknown database(s): {', '.join(sorted(unknown))}")
    if "postgresql" in args.databases and not args.pg_url:
        p.error("CARDHOUR_TEST_PG_URL is not set: run under scripts/with-postgres.sh")
    if args.instances < 1 or args.runs < 1:
        p.error("--instances and --runs must be at least 1")
    return args


def machine(pg_url: str | None) -> dict[str, Any]:
    model = host_platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": host_platform.python_version(),
        "load_average": os.getloadavg()[0],
    }
    if pg_url:
        engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as conn:
            info["postgresql"] = conn.execute(text("SHOW server_version")).scalar_one()
        engine.dispose()
    return info


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "src/cardhour")
    return head + (" (with uncommitted changes under src/cardhour)" if dirty else "")


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    host = machine(args.pg_url)
    with tempfile.TemporaryDirectory(prefix="cardhour-bench-billing-") as tmp:
        results = [measure(kind, args, Path(tmp)) for kind in args.databases]
    command = "make bench-billing" + (
        f" BENCH_ARGS={shlex.quote(shlex.join(argv))}" if argv else ""
    )
    return {
        "command": command,
        "machine": host,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "instances": args.instances,
        "runs": args.runs,
        "results": results,
    }


def failures(report: dict[str, Any]) -> list[str]:
    missed = []
    for r in report["results"]:
        if not r["balanced"]:
            missed.append(f"{r['database']}: ledger not balanced: {r['problems']}")
        if r["misbilled"]:
            missed.append(f"{r['database']}: {r['misbilled']} instances billed wrong")
        if r["target"] and r["pass_s"] > TARGET_S:
            missed.append(f"{r['database']}: pass {r['pass_s']:.2f} s > {TARGET_S:g} s")
    return missed


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    report = run(args, argv)
    sys.stdout.write(render_console(report))
    if args.write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        existing = args.out.read_text() if args.out.exists() else None
        args.out.write_text(keep_notes(render_markdown(report), existing))
        log(f"wrote {args.out}")
    missed = failures(report)
    for line in missed:
        log(f"FAIL: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
