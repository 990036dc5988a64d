"""Rows and service results → response schemas."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from cardhour.api import schemas
from cardhour.core import cluster
from cardhour.core.clock import as_utc
from cardhour.core.cluster import ClusterNode
from cardhour.core.money import Money
from cardhour.db.models import InstanceRow, UserRow
from cardhour.services.billing import pricing
from cardhour.services.compute import catalog, defrag, views


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
    """`row` as the API shows it: a list's view, or with `events` the detail view (events,
    readiness stages, gate figures, cluster, weights)."""
    view = views.detail(session, row) if events else views.summary(session, row)
    return instance_read(view)


def instance_read(v: views.InstanceView) -> schemas.InstanceRead:
    return schemas.InstanceRead(
        id=v.id,
        name=v.name,
        status=v.status,
        status_reason=v.status_reason,
        gpu=v.gpu,
        count=v.count,
        image=v.image,
        plan=v.plan,
        plan_until=v.plan_until,
        at_expiry=v.at_expiry,
        movable=v.movable,
        bare_metal=v.bare_metal,
        no_gpu=v.no_gpu,
        data_centre=v.data_centre,
        nodes=v.nodes,
        currency=v.currency,
        price_per_card_hour=v.price.display(),
        cost_so_far=v.cost_so_far.exact_str(),
        held=(v.held if v.held is not None else Money.zero(v.price.currency)).exact_str(),
        connection=v.connection,
        created_at=v.created_at,
        updated_at=v.updated_at,
        command=v.command,
        env=v.env,
        ports=v.ports,
        ssh=schemas.SshRead(host=v.ssh.host, port=v.ssh.port, user=v.ssh.user) if v.ssh else None,
        published=v.published,
        volumes=[schemas.VolumeMount(volume=name, path=path) for name, path in v.volumes],
        **(_detail(v) if v.detailed else {}),
    )


def _detail(v: views.InstanceView) -> dict[str, Any]:
    return {
        "events": [
            schemas.EventRead(
                at=e.at, from_status=e.from_status, to_status=e.to_status, reason=e.reason
            )
            for e in v.events
        ],
        "stages": [
            schemas.StageRead(
                name=s.name,
                started_at=s.started_at,
                finished_at=s.finished_at,
                outcome=s.outcome,
                detail=s.detail,
            )
            for s in v.stages
        ],
        "gate": v.gate,
        "cluster": _cluster(v.cluster),
        "weights": schemas.WeightsPlanRead(
            id=v.weights.id,
            mount=v.weights.mount,
            local=v.weights.local,
            copy_seconds=v.weights.copy_seconds,
        )
        if v.weights
        else None,
    }


def _cluster(nodes: list[ClusterNode]) -> schemas.ClusterRead | None:
    """Roles, hostnames and environment while the instance holds nodes."""
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
