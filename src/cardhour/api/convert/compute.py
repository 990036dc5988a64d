"""Rows and service results → response schemas."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.core import cluster
from cardhour.core.clock import as_utc
from cardhour.core.money import Money
from cardhour.db.models import InstanceRow, UserRow
from cardhour.services.billing import pricing, wallet
from cardhour.services.compute import catalog, defrag, instances, readiness


def user(row: UserRow) -> schemas.UserRead:
    return schemas.UserRead(
        id=row.id, email=row.email, role=row.role, created_at=as_utc(row.created_at)
    )


def quote(q: catalog.Quote) -> schemas.QuoteRead:
    return schemas.QuoteRead(
        count=q.count,
        currency=q.per_hour.currency,
        price_per_card_hour=q.price_per_card_hour.display(),
        monthly_price_per_card_hour=q.monthly_price_per_card_hour.display(),
        per_hour=q.per_hour.display(),
        per_month_on_demand=q.per_month_on_demand.display(),
        per_month_monthly_plan=q.per_month_monthly_plan.display(),
    )


def offer(o: catalog.Offer) -> schemas.OfferRead:
    rec = o.recommendation
    return schemas.OfferRead(
        gpu=o.model.id,
        gpu_name=o.model.name,
        data_centre=o.data_centre,
        data_centre_name=o.data_centre_name,
        ownership=o.ownership,
        gpus_per_node=o.gpus_per_node,
        total_gpus=o.total_gpus,
        free_gpus=o.free_gpus,
        free_nodes=o.free_nodes,
        currency=o.quote.per_hour.currency,
        price_per_card_hour=o.quote.price_per_card_hour.display(),
        monthly_price_per_card_hour=o.quote.monthly_price_per_card_hour.display(),
        spec=schemas.GpuSpecRead(
            name=o.model.name,
            bf16_tflops=str(o.model.bf16_tflops),
            memory_gb=o.model.memory_gb,
            in_node_link=o.model.in_node_link,
            nvlink=o.model.nvlink,
        ),
        quote=quote(o.quote),
        recommendation=schemas.RecommendationRead(**rec.__dict__) if rec else None,
    )


def instance(session: Session, row: InstanceRow, events: bool = False) -> schemas.InstanceRead:
    nodes = instances.nodes_of(session, row)
    return schemas.InstanceRead(
        id=row.id,
        name=row.name,
        status=row.status,
        status_reason=row.status_reason,
        gpu=row.gpu_model,
        count=row.gpu_count,
        image=row.image,
        plan=row.plan,
        plan_until=as_utc(row.plan_until) if row.plan_until else None,
        at_expiry=row.plan_at_expiry,
        movable=row.movable,
        bare_metal=row.bare_metal,
        data_centre=row.data_centre,
        nodes=nodes,
        currency=row.currency,
        price_per_card_hour=Money(row.price_micros, row.currency).display(),
        cost_so_far=Money(row.billed_micros, row.currency).exact_str(),
        held=Money(wallet.held_for(session, row), row.currency).exact_str(),
        connection=json.loads(row.connection) if row.connection else None,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        events=[
            schemas.EventRead(
                at=as_utc(e.at), from_status=e.from_status, to_status=e.to_status, reason=e.reason
            )
            for e in instances.events_of(session, row)
        ]
        if events
        else [],
        **(_readiness(session, row) if events else {}),
    )


def _readiness(session: Session, row: InstanceRow) -> dict[str, Any]:
    stages = [
        schemas.StageRead(
            name=s.name,
            started_at=as_utc(s.started_at),
            finished_at=as_utc(s.finished_at) if s.finished_at else None,
            outcome=s.outcome,
            detail=json.loads(s.detail) if s.detail else {},
        )
        for s in readiness.stages_of(session, row)
    ]
    gate = next((s.detail for s in stages if s.name == "nccl_gate" and s.detail), None)
    weights = None
    if row.weights is not None:
        placed = next((s.detail for s in stages if s.name == "allocated"), {})
        found = placed.get("weights") or {"id": row.weights, "mount": f"/models/{row.weights}"}
        weights = schemas.WeightsPlanRead(
            id=found["id"],
            mount=found["mount"],
            local=bool(found.get("local", False)),
            copy_seconds=int(found.get("copy_seconds", 0)),
        )
    return {
        "stages": stages,
        "gate": gate,
        "cluster": _cluster(session, row),
        "weights": weights,
    }


def _cluster(session: Session, row: InstanceRow) -> schemas.ClusterRead | None:
    """Roles, hostnames and environment while the instance holds nodes."""
    nodes = instances.cluster_of(session, row)
    if not nodes:
        return None
    return schemas.ClusterRead(
        nodes=[
            schemas.ClusterNodeRead(
                rank=n.rank,
                role=n.role,
                hostname=n.hostname,
                node=n.node,
                address=n.address,
                gpus=n.gpus,
                env=cluster.environment(nodes, n.rank),
            )
            for n in nodes
        ],
        hostfile=cluster.hostfile(nodes),
    )


def defrag_answer(answer: defrag.DefragAnswer) -> schemas.DefragRead:
    plan = answer.plan
    if plan is None:
        return schemas.DefragRead(
            request=answer.request, fits_now=False, moves=[], target_nodes=[], reason=answer.reason
        )
    return schemas.DefragRead(
        request=answer.request,
        fits_now=not plan.moves,
        moves=[
            schemas.DefragMoveRead(
                instance=m.container_id, from_node=m.from_node, to_node=m.to_node, gpus=list(m.gpus)
            )
            for m in plan.moves
        ],
        target_nodes=list(plan.target_nodes),
        reason=None,
    )


def price_line(line: pricing.PriceLine) -> schemas.PriceRead:
    return schemas.PriceRead(
        gpu=line.gpu_model,
        data_centre=line.data_centre,
        currency=line.on_demand.currency,
        on_demand=line.on_demand.display(),
        monthly=line.monthly.display(),
        effective_from=line.effective_from,
        current=line.current,
    )
