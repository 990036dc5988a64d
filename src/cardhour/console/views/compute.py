"""The compute pages' data: the GPU cards and the quote of the launch form, the live table of
instances (with their readiness stages as marks), and one instance's page (for a cluster: its
cluster page: status, where it is, the topology and the bus bandwidth it should reach, the
readiness stages with the gate's figures, the nodes with roles and hostnames, how to connect,
the job environment and the events).

Instances come from `services.compute.views`, the read model `GET /api/v1/instances` maps too.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core import cluster
from cardhour.core.catalog import Catalog
from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import validate_gpu_count
from cardhour.core.states import InstanceStatus
from cardhour.db.models import UserRow
from cardhour.platform import Platform
from cardhour.services.compute import catalog, instances, views
from cardhour.services.compute.views import StageView

ACTIONS = {
    InstanceStatus.PENDING: ["stop", "terminate"],
    InstanceStatus.PROVISIONING: ["stop", "terminate"],
    InstanceStatus.RUNNING: ["stop", "terminate"],
    InstanceStatus.STOPPING: [],
    InstanceStatus.STOPPED: ["start", "terminate"],
    InstanceStatus.FAILED: ["terminate"],
    InstanceStatus.TERMINATED: [],
}
MARKS = {"ok": "✓", "failed": "✗", "skipped": "–", None: "…"}


def inventory_cards(session: Session, platform: Platform, now: datetime) -> list[dict[str, Any]]:
    """One card per GPU model: free and total GPUs over all data centres, the lowest price."""
    by_model: dict[str, list[catalog.Offer]] = defaultdict(list)
    for offer in catalog.offers(session, platform.catalog, platform.policy, now):
        by_model[offer.model.id].append(offer)
    cards = []
    for model in platform.catalog.gpu_models:
        offers = by_model.get(model.id)
        if not offers:
            continue
        cheapest = min(offers, key=lambda o: o.quote.price_per_card_hour.micros)
        cards.append(
            {
                "gpu": model.id,
                "name": model.name,
                "memory_gb": model.memory_gb,
                "link": model.in_node_link.split(" (")[0],
                "price": cheapest.quote.price_per_card_hour.display(),
                "monthly": cheapest.quote.monthly_price_per_card_hour.display(),
                "free_gpus": sum(o.free_gpus for o in offers),
                "total_gpus": sum(o.total_gpus for o in offers),
                "free_nodes": sum(o.free_nodes for o in offers),
                "dcs": ", ".join(o.data_centre_name for o in offers),
            }
        )
    return cards


def parse_count(text: str | int) -> int:
    """A GPU count from a form field; InvalidInput with a readable message otherwise."""
    try:
        return validate_gpu_count(int(str(text).strip()))
    except ValueError as exc:
        raise InvalidInput("enter a whole number of GPUs") from exc


def quote_view(
    session: Session, platform: Platform, now: datetime, gpu: str, count: str | int
) -> dict[str, Any]:
    count = parse_count(count)
    offers = catalog.offers(session, platform.catalog, platform.policy, now, gpu, count)
    if not offers:
        return {"quote_error": f"no {gpu} in this fleet"}
    placeable = [o for o in offers if o.recommendation and o.recommendation.available]
    chosen = placeable[0] if placeable else offers[0]
    return {
        "gpu": chosen.model.id,
        "count": count,
        "rec": chosen.recommendation,
        "dc": chosen.data_centre_name if placeable else None,
        "per_hour": chosen.quote.per_hour.display(),
        "per_month": chosen.quote.per_month_monthly_plan.display(),
    }


def instance_rows(session: Session, user: UserRow) -> list[dict[str, Any]]:
    """The live table: the user's instances (terminated ones left out)."""
    out = []
    for row in instances.list_for(session, user):
        v = views.summary(session, row, stages=True, held=False)
        out.append(
            {
                "id": v.id,
                "name": v.name,
                "status": v.status,
                "status_reason": v.status_reason,
                "gpu": v.gpu,
                "count": v.count,
                "no_gpu": v.no_gpu,
                "data_centre": v.data_centre,
                "nodes": v.nodes,
                "price_per_card_hour": v.price.display(),
                "currency": v.currency,
                "cost_so_far": v.cost_so_far.format(4),
                "connection": v.connection,
                "actions": ACTIONS[InstanceStatus(v.status)],
                "stages": stage_marks(v.stages),
            }
        )
    return out


def stage_marks(stages: list[StageView]) -> list[dict[str, str]]:
    """The readiness stages of the latest placement as short marks for the live table: name,
    mark, outcome and, for the nccl gate, the busbw per node."""
    marks = []
    for stage in stages:
        detail = stage.detail
        figures = ""
        if stage.name == "nccl_gate" and detail.get("nccl_busbw_gbps"):
            figures = " ".join(f"{v:g}" for v in detail["nccl_busbw_gbps"].values()) + " GB/s"
            if detail.get("across_nodes_gbps") is not None:
                figures += f", across {detail['across_nodes_gbps']:g} GB/s"
        marks.append(
            {
                "name": stage.name.replace("_", " "),
                "mark": MARKS.get(stage.outcome, "?"),
                "outcome": stage.outcome or "running",
                "figures": figures,
            }
        )
    return marks


def instance_page(session: Session, catalog: Catalog, user: UserRow, ident: str) -> dict[str, Any]:
    """Everything the instance page shows; NotFound for an instance that is not the user's."""
    v = views.detail(session, instances.get(session, user, ident))
    topo = views.topology(session, catalog, v)
    gate = v.gate or {}
    per_node = gate.get("nccl_busbw_gbps", {})
    nodes = v.cluster
    return {
        "i": {
            "id": v.id,
            "name": v.name,
            "status": v.status,
            "status_reason": v.status_reason,
            "gpu": v.gpu,
            "count": v.count,
            "no_gpu": v.no_gpu,
            "bare_metal": v.bare_metal,
            "image": v.image,
            "data_centre": v.data_centre,
            "price": v.price.display(),
            "currency": v.currency,
            "cost_so_far": v.cost_so_far.format(4),
            "held": v.held.format(2) if v.held is not None else "",
            "connection": v.connection,
        },
        "topology": {
            "link": topo.link,
            "leaves": topo.leaves,
            "spines": topo.spines,
            "expected_busbw": topo.expected_busbw,
        },
        "stages": [_stage(s) for s in v.stages],
        "gate": gate,
        "nodes": [
            {
                "rank": n.rank,
                "role": n.role,
                "hostname": n.hostname,
                "node": n.node,
                "address": n.address,
                "gpus": n.gpus,
                "leaf": topo.leaf_of[n.node],
                "busbw": per_node.get(n.node),
                "threshold": gate.get("thresholds_gbps", {}).get(n.node),
            }
            for n in nodes
        ],
        "env": cluster.environment(nodes, 0) if nodes else {},
        "hostfile": cluster.hostfile(nodes) if nodes else "",
        "events": [
            {"at": _hms(e.at), "to": e.to_status, "reason": e.reason or ""} for e in v.events
        ],
    }


def _stage(s: StageView) -> dict[str, Any]:
    took = (s.finished_at - s.started_at).total_seconds() if s.finished_at else None
    return {
        "name": s.name.replace("_", " "),
        "started": _hms(s.started_at),
        "took": f"{took:.0f} s" if took is not None else "…",
        "outcome": s.outcome or "running",
        "detail": _summary(s.detail),
    }


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
