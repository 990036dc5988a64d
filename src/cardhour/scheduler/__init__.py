"""The placement engine: a snapshot of the fleet in, decisions out. Pure: never touches the DB.

Importing the package registers every score plugin and named policy (`framework.PROFILES`).
"""

from cardhour.scheduler.engine import Scheduler, warm
from cardhour.scheduler.frag import TypicalWorkload
from cardhour.scheduler.framework import PROFILES, Profile, profile_named
from cardhour.scheduler.profiles import DEFAULT_POLICY
from cardhour.scheduler.request import (
    MAX_GANG_NODES,
    MILLI,
    Binding,
    Kind,
    Pending,
    Placement,
    Request,
)
from cardhour.scheduler.state import FleetState, NodeInfo

__all__ = [
    "DEFAULT_POLICY",
    "MAX_GANG_NODES",
    "MILLI",
    "PROFILES",
    "Binding",
    "FleetState",
    "Kind",
    "NodeInfo",
    "Pending",
    "Placement",
    "Profile",
    "Request",
    "Scheduler",
    "TypicalWorkload",
    "profile_named",
    "warm",
]
