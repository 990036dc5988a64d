"""Live inventory (offers), quotes and topology recommendations."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy.orm import Session

from cardhour.core.catalog import HOURS_PER_MONTH, Catalog
from cardhour.core.gpus import GpuModel
from cardhour.core.money import Money
from cardhour.core.topology import NodeSpec
from cardhour.scheduler import Placement, PlacementRequest, Policy, Snapshot, Unschedulable
from cardhour.services import fleet


@dataclass(frozen=True)
class Quote:
    count: int
    price_per_card_hour: Money
    monthly_price_per_card_hour: Money
    per_hour: Money
    per_month_on_demand: Money  # 30 days × 24 h at the on-demand price
    per_month_monthly_plan: Money


def quote(catalog: Catalog, gpu_model: str, data_centre: str, count: int) -> Quote:
    on_demand = catalog.prices.on_demand(gpu_model, data_centre)
    monthly = catalog.prices.monthly(gpu_model, data_centre)
    return Quote(
        count=count,
        price_per_card_hour=on_demand,
        monthly_price_per_card_hour=monthly,
        per_hour=on_demand.times(count),
        per_month_on_demand=on_demand.times(count * HOURS_PER_MONTH),
        per_month_monthly_plan=monthly.times(count * HOURS_PER_MONTH),
    )


@dataclass(frozen=True)
class Recommendation:
    available: bool
    summary: str  # one line a person reads
    nodes: list[str]
    ib_leaves: list[str]
    interconnect: str  # "NVLink" | "PCIe" | "NVLink + InfiniBand"
    reason: str | None = None


def describe(placement: Placement, model: GpuModel, specs: dict[str, NodeSpec]) -> Recommendation:
    nodes = sorted(placement.gpus_by_node)
    first = specs[nodes[0]]
    link = model.in_node_link
    if len(nodes) == 1:
        gpus = len(placement.gpus_by_node[nodes[0]])
        inter = "NVLink" if model.nvlink else "PCIe"
        where = (
            "1 node" if gpus == first.gpu_count else f"{gpus} of {first.gpu_count} GPUs on 1 node"
        )
        summary = f"{where} ({nodes[0]}), {gpus} × {model.id} over {link}"
        return Recommendation(True, summary, nodes, list(placement.ib_leaves), inter)
    leaves = len(placement.ib_leaves)
    under = "one IB leaf" if leaves == 1 else f"{leaves} IB leaves"
    if len(placement.ib_spines) > 1:
        under += f" across {len(placement.ib_spines)} spines"
    fabric = f"{first.ib_rails} × {first.ib_gbps_per_rail} Gb/s InfiniBand"
    summary = (
        f"{len(nodes)} whole nodes under {under} ({', '.join(placement.ib_leaves)}): "
        f"{link} inside each node, {fabric} between them"
    )
    inter = "NVLink + InfiniBand" if model.nvlink else "PCIe + InfiniBand"
    return Recommendation(True, summary, nodes, list(placement.ib_leaves), inter)


def recommend(
    catalog: Catalog,
    policy: Policy,
    snap: Snapshot,
    model: GpuModel,
    count: int,
    data_centre: str | None = None,
) -> Recommendation:
    decision = policy.place(snap, PlacementRequest((model.id,), count, data_centre))
    if isinstance(decision, Unschedulable):
        return Recommendation(
            False, f"cannot place {count} × {model.id} now", [], [], "", decision.reason
        )
    return describe(decision, model, {n.spec.id: n.spec for n in snap.nodes})


@dataclass(frozen=True)
class Offer:
    model: GpuModel
    data_centre: str
    data_centre_name: str
    ownership: str
    gpus_per_node: int
    total_gpus: int
    free_gpus: int
    free_nodes: int
    quote: Quote
    recommendation: Recommendation | None  # only when a count was asked for


def offers(
    session: Session,
    catalog: Catalog,
    policy: Policy,
    gpu: str | None = None,
    count: int | None = None,
) -> list[Offer]:
    """One offer per GPU model × data centre, from the live allocations."""
    models = [catalog.model(gpu)] if gpu else catalog.gpu_models
    snap = fleet.snapshot(session)
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for node in snap.nodes:
        if node.schedulable:
            groups[(node.spec.gpu_model, node.spec.data_centre)].append(node)
    result = []
    for model in models:
        for dc in catalog.data_centres:
            nodes = groups.get((model.id, dc.id))
            if not nodes:
                continue
            rec = None
            if count is not None:
                rec = recommend(catalog, policy, snap, model, count, dc.id)
            result.append(
                Offer(
                    model=model,
                    data_centre=dc.id,
                    data_centre_name=dc.name,
                    ownership=dc.ownership,
                    gpus_per_node=max(n.spec.gpu_count for n in nodes),
                    total_gpus=sum(n.spec.gpu_count for n in nodes),
                    free_gpus=sum(len(n.free_gpus) for n in nodes),
                    free_nodes=sum(1 for n in nodes if n.is_empty),
                    quote=quote(catalog, model.id, dc.id, count or 1),
                    recommendation=rec,
                )
            )
    return result
