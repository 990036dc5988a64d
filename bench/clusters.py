"""`make bench-clusters`: control-plane time from request to `ready` for a 128-node (1,024-GPU)
H100 cluster on the `sim` backend with zero simulated boot time; target ≤ 5 s.

The fleet: the demo fleet file with bj1's H100 group grown to 160 nodes of 8 × H100, 8 × 400 Gb/s
rails, 32 nodes per IB leaf (a DGX SuperPOD scalable unit), so the cluster needs 4 leaves at
least. A user with enough cash launches `H100:8 --nodes 128` through the service a `POST
/api/v1/instances` calls, then the reconcilers run (`platform.reconcile()`, what `cardhour up`'s
threads do) until it is `running`. Timed, on the injected clock's frozen instant: the launch
(validation, quote, hold), the scheduling pass (the gang on the fewest leaves), and the
provisioning pass with the readiness gate (128 × `nvidia-smi topo -m`, `ibstat` and an
all_reduce_perf per node, then one across the nodes, each printed and parsed). Baseline in the
same run: the same request with the gate off (the backend's `running` taken as ready), so the
ratio is the gate's cost. Checks: `running`, every stage `ok` but the keys (`skipped`: no key),
128 nodes with figures, the leaves used equal to the minimum, `ledger.verify` balanced.

Median of `--runs` (3) fresh platforms per database: SQLite, and PostgreSQL when
`CARDHOUR_TEST_PG_URL` is set (`scripts/with-postgres.sh` sets it). Prints a table and writes
docs/benchmarks/clusters.md above its notes marker (`--no-write`: print only). Exit 1 when a
check fails or a database misses the target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from billing import commit, header, keep_notes, machine, md_table, text_table
from billing_setup import fresh_database

from cardhour.core.clock import ManualClock
from cardhour.core.money import Money
from cardhour.db.engine import transaction
from cardhour.db.models import InstanceRow, NodeRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import customers, ledger
from cardhour.services.compute import instances, readiness, views
from cardhour.services.compute.instances import LaunchRequest
from cardhour.settings import Settings, default_fleet_text

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0
NODES, NODES_PER_LEAF, FLEET_NODES = 128, 32, 160
NOTES_MARKER = "<!-- notes below are kept -->"
log = functools.partial(print, file=sys.stderr, flush=True)


def fleet_file(folder: Path) -> Path:
    raw = yaml.safe_load(default_fleet_text())
    for dc in raw["data_centres"]:
        for group in dc["node_groups"]:
            if dc["id"] == "bj1" and group["gpu_model"] == "H100":
                group |= {
                    "count": FLEET_NODES,
                    "nodes_per_leaf": NODES_PER_LEAF,
                    "ib_gbps_per_rail": 400,
                }
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def one_run(url: str, tmp: Path, gate: bool) -> dict[str, Any]:
    settings = Settings(
        database_url=url,
        data_dir=tmp / f"data-{uuid.uuid4().hex[:8]}",
        fleet_file=fleet_file(tmp),
        sim={"provision_seconds": 0},
    )
    platform = Platform(settings, clock=ManualClock())
    try:
        if not gate:
            platform.provisioner.gated = False  # the backend's `running` is taken as ready
        now = platform.clock.now()
        with transaction(platform.sessions) as s:
            email = f"bench-{uuid.uuid4().hex[:6]}@example.com"
            user = customers.sign_up(s, email, "pw-12345678", now, platform.trial())
            ledger.top_up(s, user.id, Money.parse("10000"), now, f"bench-{uuid.uuid4().hex}")
        platform.reconcile()  # inventory in, nothing pending
        started = time.perf_counter()
        with transaction(platform.sessions) as s:
            user_row = accounts.get_user(s, user.id)
            assert user_row is not None
            req = LaunchRequest(gpu="H100", count=8, name="bench", nodes=NODES)
            row = instances.create(s, platform.catalog, user_row, req, now)
            instance_id = row.id
        launched = time.perf_counter()
        platform.scheduler.step()
        placed = time.perf_counter()
        platform.provisioner.step()
        ready = time.perf_counter()
        return {
            "launch": launched - started,
            "schedule": placed - launched,
            "provision": ready - placed,
            "total": ready - started,
            **check(platform, instance_id, gate),
        }
    finally:
        platform.stop()


def min_leaves(free_per_leaf: list[int], nodes: int) -> int:
    """The fewest leaves whose free nodes add up to `nodes` (largest first)."""
    total = 0
    for used, free in enumerate(sorted(free_per_leaf, reverse=True), start=1):
        total += free
        if total >= nodes:
            return used
    return len(free_per_leaf) + 1  # cannot fit


def check(platform: Platform, instance_id: str, gate: bool) -> dict[str, Any]:
    """What came out: running, the stages, the nodes measured, the leaves, the ledger."""
    with transaction(platform.sessions) as s:
        row = s.get(InstanceRow, instance_id)
        assert row is not None
        stages = {st.name: st for st in readiness.stages_of(s, row)}
        nodes = views.nodes_of(s, row)
        leaves = {n.ib_leaf for n in s.query(NodeRow) if n.id in set(nodes)}
        free_per_leaf: dict[str, int] = {}
        for node in s.query(NodeRow):
            if node.gpu_model == "H100" and node.data_centre == "bj1" and node.ib_leaf:
                free_per_leaf[node.ib_leaf] = free_per_leaf.get(node.ib_leaf, 0) + 1
        gate_detail = stages["nccl_gate"].detail if "nccl_gate" in stages else None
        measured = len(json.loads(gate_detail)["nccl_busbw_gbps"]) if gate_detail else 0
        problems = []
        if row.status != "running":
            problems.append(f"status {row.status}: {row.status_reason}")
        if gate:
            wanted = {"keys_injected": "skipped"}
            for name in ("allocated", "booting", "topology_detected", "nccl_gate", "ready"):
                wanted[name] = "ok"
            got = {n: st.outcome for n, st in stages.items()}
            if got != wanted:
                problems.append(f"stages {got}")
            if measured != NODES:
                problems.append(f"{measured} nodes measured, not {NODES}")
        if len(nodes) != NODES:
            problems.append(f"{len(nodes)} nodes placed")
        verified = ledger.verify(s).balanced
        if not verified:
            problems.append("ledger not balanced")
    fewest = min_leaves(list(free_per_leaf.values()), NODES)
    if len(leaves) != fewest:
        problems.append(f"{len(leaves)} leaves used, {fewest} would do")
    return {"leaves": len(leaves), "min_leaves": fewest, "problems": problems}


def measure(kind: str, url_source: str | None, runs: int, tmp: Path) -> dict[str, Any]:
    found: dict[str, list[dict[str, Any]]] = {"gate": [], "no gate": []}
    for i in range(runs):
        for mode in found:
            with fresh_database(kind, url_source, tmp) as url:
                found[mode].append(one_run(url, tmp, gate=mode == "gate"))
            log(f"{kind} run {i + 1}/{runs} {mode}: {found[mode][-1]['total']:.3f} s")
    median = {
        mode: {
            k: statistics.median(r[k] for r in rs)
            for k in ("launch", "schedule", "provision", "total")
        }
        for mode, rs in found.items()
    }
    every = [r for rs in found.values() for r in rs]
    return {
        "database": kind,
        "median": median,
        "runs": [r["total"] for r in found["gate"]],
        "leaves": sorted({r["leaves"] for r in every}),
        "min_leaves": sorted({r["min_leaves"] for r in every}),
        "problems": [p for r in every for p in r["problems"]][:5],
    }


HEAD = [
    "database",
    "total (median)",
    "runs",
    "launch",
    "schedule",
    "provision + gate",
    "no gate (baseline)",
    "gate ÷ baseline",
    "IB leaves (min)",
    "checks",
    "target",
]


def rows(report: dict[str, Any]) -> list[list[str]]:
    out = []
    for r in report["results"]:
        gate, base = r["median"]["gate"], r["median"]["no gate"]
        out.append(
            [
                r["database"],
                f"{gate['total']:.3f} s",
                " ".join(f"{t:.3f}" for t in r["runs"]),
                f"{gate['launch']:.3f} s",
                f"{gate['schedule']:.3f} s",
                f"{gate['provision']:.3f} s",
                f"{base['total']:.3f} s",
                f"{gate['total'] / base['total']:.2f}×",
                f"{'/'.join(map(str, r['leaves']))} ({'/'.join(map(str, r['min_leaves']))})",
                "ok" if not r["problems"] else "; ".join(r["problems"]),
                f"≤ {TARGET_S:g} s: " + ("pass" if gate["total"] <= TARGET_S else "FAIL"),
            ]
        )
    return out


def render_markdown(report: dict[str, Any]) -> str:
    parts = [
        *header("Cluster benchmark", "bench-clusters", "clusters.py", report),
        md_table(HEAD, rows(report)),
        "",
        f"One request for {NODES} nodes × 8 H100 ({NODES * 8:,} GPUs) on the `sim` backend with "
        f"0 s simulated boot, in a fleet of {FLEET_NODES} H100 nodes, {NODES_PER_LEAF} per IB "
        "leaf; control-plane time from the launch call to `running` (launch: validation, quote, "
        "hold; schedule: one scheduling pass, the gang on the fewest leaves; provision + gate: "
        "one provisioning pass, with every readiness stage, 128 topology and nccl reports "
        "printed and parsed, one all-reduce across the nodes). Baseline: the same with the "
        f"gate off. Median of {report['runs']} fresh platforms per database.",
        "",
        NOTES_MARKER,
    ]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/clusters.py", description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3, help="fresh platforms per database (3)")
    p.add_argument("--no-write", dest="write", action="store_false", help="print only")
    p.add_argument(
        "--no-target",
        dest="target",
        action="store_false",
        help="exit 0 on a missed time target (the tests: time is measured here, not there)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "clusters.md")
    args = p.parse_args(argv)
    pg_url = os.environ.get("CARDHOUR_TEST_PG_URL")
    kinds = ["sqlite"] + (["postgresql"] if pg_url else [])
    host = machine(pg_url)
    with tempfile.TemporaryDirectory(prefix="cardhour-bench-clusters-") as tmp:
        results = [measure(kind, pg_url, args.runs, Path(tmp)) for kind in kinds]
    report = {
        "command": "make bench-clusters"
        + (f" BENCH_ARGS={shlex.quote(shlex.join(argv))}" if argv else ""),
        "machine": host,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "runs": args.runs,
        "results": results,
    }
    print(f"request to running for {NODES} × 8 H100 on sim, median of {args.runs}")
    print(text_table(HEAD, rows(report)))
    if args.write:
        existing = args.out.read_text() if args.out.exists() else None
        args.out.write_text(keep_notes(render_markdown(report), existing))
        log(f"wrote {args.out}")
    slow = args.target and any(r["median"]["gate"]["total"] > TARGET_S for r in results)
    return 1 if slow or any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
