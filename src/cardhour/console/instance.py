"""The console's page of one instance (for a cluster: its cluster page): status, where it is,
the topology and the bus bandwidth it should reach, the readiness stages with the gate's
figures, the nodes with roles and hostnames, how to connect, the job environment and the events.
Computed from the same services as `GET /api/v1/instances/{id}`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core import cluster, readiness
from cardhour.core.catalog import Catalog
from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.db.models import InstanceRow, UserRow
from cardhour.services.billing import wallet
from cardhour.services.compute import fleet, instances
from cardhour.services.compute import readiness as stages
from cardhour.services.compute.fleet import spec_of


def instance_view(session: Session, catalog: Catalog, user: UserRow, ident: str) -> dict[str, Any]:
    """Everything the page shows; NotFound for an instance that is not the user's."""
    row = instances.get(session, user, ident)
    nodes = instances.cluster_of(session, row)
    specs = {
        u.row.id: spec_of(u.row)
        for u in fleet.node_usage(session)
        if u.row.id in {n.node for n in nodes}
    }
    gate = _gate(session, row)
    per_node = gate.get("nccl_busbw_gbps", {})
    model = catalog.model_by_id(row.gpu_model)
    placed = [specs[n.node] for n in nodes]
    expected = readiness.expected_busbw(model, nodes[0].gpus, placed) if nodes else None
    return {
        "i": {
            "id": row.id,
            "name": row.name,
            "status": row.status,
            "status_reason": row.status_reason,
            "gpu": row.gpu_model,
            "count": row.gpu_count,
            "bare_metal": row.bare_metal,
            "image": row.image,
            "data_centre": row.data_centre,
            "price": Money(row.price_micros, row.currency).display(),
            "currency": row.currency,
            "cost_so_far": Money(row.billed_micros, row.currency).format(4),
            "held": Money(wallet.held_for(session, row), row.currency).format(2),
            "connection": json.loads(row.connection) if row.connection else None,
        },
        "topology": {
            "link": model.in_node_link,
            "leaves": sorted({s.ib_leaf for s in placed if s.ib_leaf}),
            "spines": sorted({s.ib_spine for s in placed if s.ib_spine}),
            "expected_busbw": expected,
        },
        "stages": _stages(session, row),
        "gate": gate,
        "nodes": [
            {
                "rank": n.rank,
                "role": n.role,
                "hostname": n.hostname,
                "node": n.node,
                "address": n.address,
                "gpus": n.gpus,
                "leaf": specs[n.node].ib_leaf,
                "busbw": per_node.get(n.node),
                "threshold": gate.get("thresholds_gbps", {}).get(n.node),
            }
            for n in nodes
        ],
        "env": cluster.environment(nodes, 0) if nodes else {},
        "hostfile": cluster.hostfile(nodes) if nodes else "",
        "events": [
            {"at": _hms(as_utc(e.at)), "to": e.to_status, "reason": e.reason or ""}
            for e in instances.events_of(session, row)
        ],
    }


def _gate(session: Session, row: InstanceRow) -> dict[str, Any]:
    for stage in stages.stages_of(session, row):
        if stage.name == "nccl_gate" and stage.detail:
            found: dict[str, Any] = json.loads(stage.detail)
            return found
    return {}


def _stages(session: Session, row: InstanceRow) -> list[dict[str, Any]]:
    out = []
    for s in stages.stages_of(session, row):
        started = as_utc(s.started_at)
        took = (as_utc(s.finished_at) - started).total_seconds() if s.finished_at else None
        detail = json.loads(s.detail) if s.detail else {}
        out.append(
            {
                "name": s.name.replace("_", " "),
                "started": _hms(started),
                "took": f"{took:.0f} s" if took is not None else "…",
                "outcome": s.outcome or "running",
                "detail": _summary(detail),
            }
        )
    return out


def _summary(detail: dict[str, Any]) -> str:
    """One line of a stage's detail: what replaced what, the topology found, problems."""
    parts = []
    if detail.get("replaced"):
        parts.append(", ".join(f"{a} → {b}" for a, b in sorted(detail["replaced"].items())))
    if isinstance(detail.get("nodes"), dict):
        parts.append("; ".join(sorted(set(detail["nodes"].values()))))
    if detail.get("problems"):
        parts.append("; ".join(f"{n}: {why}" for n, why in sorted(detail["problems"].items())))
    if detail.get("why"):
        parts.append(str(detail["why"]))
    return " · ".join(parts)


def _hms(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")
