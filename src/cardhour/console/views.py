"""What the console's templates show, computed from the same services as the API."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy.orm import Session

from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import validate_gpu_count
from cardhour.core.money import Money
from cardhour.core.states import InstanceStatus
from cardhour.db.models import InstanceRow, UserRow
from cardhour.platform import Platform
from cardhour.services.accounts import users as accounts
from cardhour.services.billing import wallet
from cardhour.services.compute import catalog, instances, readiness

ACTIONS = {
    InstanceStatus.PENDING: ["stop", "terminate"],
    InstanceStatus.PROVISIONING: ["stop", "terminate"],
    InstanceStatus.RUNNING: ["stop", "terminate"],
    InstanceStatus.STOPPING: [],
    InstanceStatus.STOPPED: ["start", "terminate"],
    InstanceStatus.FAILED: ["terminate"],
    InstanceStatus.TERMINATED: [],
}


def cny(amount: str | None) -> str:
    """A decimal amount string, half up to the fen and grouped ("8,755.20"); never via float."""
    if amount is None:
        return "—"
    return f"{Decimal(amount).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"


def inventory_cards(session: Session, platform: Platform) -> list[dict[str, Any]]:
    """One card per GPU model: free and total GPUs over all data centres, the lowest price."""
    by_model: dict[str, list[catalog.Offer]] = defaultdict(list)
    for offer in catalog.offers(session, platform.catalog, platform.policy, platform.clock.now()):
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


def quote_view(session: Session, platform: Platform, gpu: str, count: str | int) -> dict[str, Any]:
    count = parse_count(count)
    offers = catalog.offers(
        session, platform.catalog, platform.policy, platform.clock.now(), gpu, count
    )
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


def balance_view(session: Session, platform: Platform, user_id: str) -> dict[str, Any]:
    currency = platform.catalog.currency
    user = accounts.get_user(session, user_id)
    return {
        "balance": wallet.balance(
            session, user_id, currency, platform.clock.now()
        ).available.floor_str(),
        "currency": currency,
        "low_balance_since": user.low_balance_since if user else None,
    }


def instance_rows(session: Session, user: UserRow) -> list[dict[str, Any]]:
    rows = instances.list_for(session, user)
    return [
        {
            "id": r.id,
            "name": r.name,
            "status": r.status,
            "status_reason": r.status_reason,
            "gpu": r.gpu_model,
            "count": r.gpu_count,
            "data_centre": r.data_centre,
            "nodes": instances.nodes_of(session, r),
            "price_per_card_hour": Money(r.price_micros, r.currency).display(),
            "currency": r.currency,
            "cost_so_far": Money(r.billed_micros, r.currency).format(4),
            "connection": json.loads(r.connection) if r.connection else None,
            "actions": ACTIONS[InstanceStatus(r.status)],
            "stages": stage_marks(session, r),
        }
        for r in rows
    ]


_MARK = {"ok": "✓", "failed": "✗", "skipped": "–", None: "…"}


def stage_marks(session: Session, row: InstanceRow) -> list[dict[str, str]]:
    """The readiness stages of the latest placement as short marks for the live table: name,
    mark, outcome and, for the nccl gate, the busbw per node."""
    marks = []
    for stage in readiness.stages_of(session, row):
        detail = json.loads(stage.detail) if stage.detail else {}
        figures = ""
        if stage.name == "nccl_gate" and detail.get("nccl_busbw_gbps"):
            figures = " ".join(f"{v:g}" for v in detail["nccl_busbw_gbps"].values()) + " GB/s"
            if detail.get("across_nodes_gbps") is not None:
                figures += f", across {detail['across_nodes_gbps']:g} GB/s"
        marks.append(
            {
                "name": stage.name.replace("_", " "),
                "mark": _MARK.get(stage.outcome, "?"),
                "outcome": stage.outcome or "running",
                "figures": figures,
            }
        )
    return marks
