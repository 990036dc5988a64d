"""Live inventory (offers), quotes and topology recommendations."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from cardhour.core import readiness
from cardhour.core.catalog import HOURS_PER_MONTH, Catalog
from cardhour.core.gpus import GpuModel
from cardhour.core.money import Money
from cardhour.core.pricing import PriceHistory
from cardhour.core.topology import NodeSpec
from cardhour.scheduler import MILLI, Pending, Placement, Scheduler
from cardhour.services.billing import pricing
from cardhour.services.compute import fleet, placement
from cardhour.services.compute.placement import Assignment


@dataclass(frozen=True)
class Quote:
    count: int
    price_per_card_hour: Money
    monthly_price_per_card_hour: Money
    per_hour: Money
    per_month_on_demand: Money  # 30 days × 24 h at the on-demand price
    per_month_monthly_plan: Money


def quote(
    prices: PriceHistory, gpu_model: str, data_centre: str, count: int, now: datetime
) -> Quote:
    """The prices in force at `now` (the versioned price book, `services.pricing`)."""
    on_demand = prices.at(gpu_model, data_centre, now)
    monthly = prices.monthly_at(gpu_model, data_centre, now)
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
    expected_busbw_gbps: float | None = None  # what the readiness gate should measure


def describe(chosen: Assignment, model: GpuModel, specs: dict[str, NodeSpec]) -> Recommendation:
    nodes = sorted(chosen.gpus_by_node)
    first = specs[nodes[0]]
    link = model.in_node_link
    if len(nodes) == 1:
        gpus = len(chosen.gpus_by_node[nodes[0]])
        inter = "NVLink" if model.nvlink else "PCIe"
        where = (
            "1 node" if gpus == first.gpu_count else f"{gpus} of {first.gpu_count} GPUs on 1 node"
        )
        summary = f"{where} ({nodes[0]}), {gpus} × {model.id} over {link}"
        busbw = readiness.expected_busbw(model, gpus, [first])
        if busbw is not None:
            summary += f"; all-reduce ~{busbw:g} GB/s busbw"
        return Recommendation(True, summary, nodes, list(chosen.ib_leaves), inter, None, busbw)
    leaves = len(chosen.ib_leaves)
    under = "one IB leaf" if leaves == 1 else f"{leaves} IB leaves"
    if len(chosen.ib_spines) > 1:
        under += f" across {len(chosen.ib_spines)} spines"
    fabric = f"{first.ib_rails} × {first.ib_gbps_per_rail} Gb/s InfiniBand"
    summary = (
        f"{len(nodes)} whole nodes under {under} ({', '.join(chosen.ib_leaves)}): "
        f"{link} inside each node, {fabric} between them"
    )
    inter = "NVLink + InfiniBand" if model.nvlink else "PCIe + InfiniBand"
    per_node = len(chosen.gpus_by_node[nodes[0]])
    busbw = readiness.expected_busbw(model, per_node, [specs[n] for n in nodes])
    if busbw is not None:
        summary += f"; all-reduce across them ~{busbw:g} GB/s busbw"
    return Recommendation(True, summary, nodes, list(chosen.ib_leaves), inter, None, busbw)


def recommend(
    scheduler: Scheduler,
    view: fleet.FleetView,
    model: GpuModel,
    count: int,
    data_centre: str | None = None,
) -> Recommendation:
    """Where `count` × `model` would go on the fleet `view` shows (nothing is reserved). The
    same fleet gets the same answer: a fresh engine (its lookahead draws from a fixed seed)."""
    shapes = placement.node_shapes(view.state)
    request = placement.to_request(shapes, "recommendation", model.id, count, data_centre)
    if isinstance(request, Pending):
        decision: Placement | Pending = request
    else:
        decision = Scheduler(scheduler.profile, scheduler.workload).place(view.state, request)
    if isinstance(decision, Pending):
        return Recommendation(
            False, f"cannot place {count} × {model.id} now", [], [], "", decision.reason
        )
    return describe(placement.assignment(view.state, decision), model, view.specs)


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
    scheduler: Scheduler,
    now: datetime,
    gpu: str | None = None,
    count: int | None = None,
) -> list[Offer]:
    """One offer per GPU model × data centre, from the live allocations, at today's prices."""
    models = [catalog.model(gpu)] if gpu else catalog.gpu_models
    prices = pricing.history(session, catalog)
    view = fleet.load(session, catalog)
    state = view.state
    free_gpus = ((state.gpu_free == MILLI) & state.gpu_real).sum(axis=1)
    empty = state.empty()
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in range(len(state)):
        if state.schedulable[i] and state.model[i] >= 0:
            groups[(state.models[state.model[i]], state.dcs[state.dc[i]])].append(i)
    result = []
    for model in models:
        for dc in catalog.data_centres:
            nodes = groups.get((model.id, dc.id))
            if not nodes or dc.id not in prices.data_centres(model.id):
                continue
            rec = None
            if count is not None:
                rec = recommend(scheduler, view, model, count, dc.id)
            result.append(
                Offer(
                    model=model,
                    data_centre=dc.id,
                    data_centre_name=dc.name,
                    ownership=dc.ownership,
                    gpus_per_node=int(state.gpu_count[nodes].max()),
                    total_gpus=int(state.gpu_count[nodes].sum()),
                    free_gpus=int(free_gpus[nodes].sum()),
                    free_nodes=int(empty[nodes].sum()),
                    quote=quote(prices, model.id, dc.id, count or 1, now),
                    recommendation=rec,
                )
            )
    return result
