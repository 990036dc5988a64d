"""Ask the defragmentation planner (`scheduler.defrag`) what it would move so a request fits.

Read-only: nothing is moved, reserved or written. A plan is a proposal for the operator; live
migration itself is not automated yet.

Contract:
- The running containers are the live allocations (`fleet.load`), each with the `Request` the
  adapter builds for its instance (`placement.to_request`, pinned to the instance's data centre,
  whose price it pays). An instance may move only if its owner marked it `movable` and it is
  `provisioning` or `running` (a `stopping` one frees its GPUs soon anyway). Allocations whose
  instance no request can express stay listed nowhere, so they block their nodes.
- The planner runs with a fresh engine for `policy` (its random generator advances during
  planning, and the engine the API threads share is never mutated), over the typical workload of
  the last `window` requests, as a scheduling cycle would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from cardhour.core.catalog import Catalog
from cardhour.core.gpus import parse_gpu_request
from cardhour.core.states import HOLDS_GPUS, InstanceStatus
from cardhour.scheduler import Pending, Placement, Profile, Request, Scheduler
from cardhour.scheduler.defrag.plan import DefragPlan, plan_defrag
from cardhour.services.compute import fleet, placement, scheduling
from cardhour.store.compute import instances as store

#: Statuses in which an instance marked movable may be moved.
MOVABLE_IN = (InstanceStatus.PROVISIONING.value, InstanceStatus.RUNNING.value)
ASKED_ID = "asked"  # the request id of what the operator asks about (never an instance id)


@dataclass(frozen=True)
class DefragAnswer:
    """`plan` (no moves: fits now), or `reason` when no plan exists. `request` is `MODEL:COUNT`
    with the catalogue's model id."""

    request: str
    plan: DefragPlan | None
    reason: str | None = None


def running(
    session: Session, view: fleet.FleetView, shapes: dict[str, placement.NodeShape]
) -> list[tuple[Request, Placement]]:
    """Every live allocation as (request, placement), movable as the instance allows."""
    holding = [s.value for s in HOLDS_GPUS]
    rows = {row.id: row for row in store.list_in_status(session, holding)}
    found: list[tuple[Request, Placement]] = []
    for instance_id, held in sorted(view.placements.items()):
        row = rows.get(instance_id)
        if row is None:
            continue
        request = placement.to_request(
            shapes, row.id, row.gpu_model, row.gpu_count, row.data_centre
        )
        if isinstance(request, Pending):
            continue
        movable = row.movable and row.status in MOVABLE_IN
        found.append((replace(request, movable=movable), held))
    return found


def ask(
    session: Session, catalog: Catalog, policy: Profile | str, window: int, asked: str
) -> DefragAnswer:
    """What the planner would move so `asked` (`MODEL:COUNT`) fits now.

    Raises InvalidInput for a bad request string, an unknown model or a bad count."""
    parsed = parse_gpu_request(asked)
    model = catalog.model(parsed.model)
    label = f"{model.id}:{parsed.count}"
    view = fleet.load(session, catalog)
    shapes = placement.node_shapes(view.state)
    request = placement.to_request(shapes, ASKED_ID, model.id, parsed.count)
    if isinstance(request, Pending):
        return DefragAnswer(label, None, request.reason)
    scheduler = Scheduler(policy, scheduling.typical_workload(session, shapes, window))
    found = plan_defrag(view.state, running(session, view, shapes), request, scheduler)
    if isinstance(found, Pending):
        return DefragAnswer(label, None, found.reason)
    return DefragAnswer(label, found)
