"""The placement engine: a snapshot of the fleet in, decisions out. Pure: never touches the DB."""

from cardhour.scheduler.interface import (
    NodeState,
    Placement,
    PlacementRequest,
    Policy,
    Snapshot,
    Unschedulable,
)
from cardhour.scheduler.simple import SimplePolicy

__all__ = [
    "NodeState",
    "Placement",
    "PlacementRequest",
    "Policy",
    "SimplePolicy",
    "Snapshot",
    "Unschedulable",
]
