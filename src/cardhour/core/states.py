"""Instance lifecycle: the states and the only transitions allowed between them."""

from __future__ import annotations

from enum import StrEnum


class InstanceStatus(StrEnum):
    PENDING = "pending"  # recorded, waiting for the scheduler
    PROVISIONING = "provisioning"  # GPUs allocated, backend bringing it up
    RUNNING = "running"  # billed from here
    STOPPING = "stopping"  # billing stopped, backend releasing
    STOPPED = "stopped"  # no GPUs held, costs nothing
    TERMINATED = "terminated"  # final
    FAILED = "failed"  # the backend could not bring it up; GPUs released


class Plan(StrEnum):
    ON_DEMAND = "on_demand"
    MONTHLY = "monthly"


ALLOWED_TRANSITIONS: dict[InstanceStatus, frozenset[InstanceStatus]] = {
    InstanceStatus.PENDING: frozenset(
        {
            InstanceStatus.PROVISIONING,
            InstanceStatus.STOPPED,
            InstanceStatus.TERMINATED,
            InstanceStatus.FAILED,
        }
    ),
    # back to PENDING: a node failed the readiness gate, the instance is placed again
    InstanceStatus.PROVISIONING: frozenset(
        {
            InstanceStatus.RUNNING,
            InstanceStatus.STOPPING,
            InstanceStatus.FAILED,
            InstanceStatus.PENDING,
        }
    ),
    # back to PROVISIONING: a lost node is being replaced (the rest stays); back to PENDING: a
    # lost node could not be replaced in place, the instance is placed again
    InstanceStatus.RUNNING: frozenset(
        {
            InstanceStatus.STOPPING,
            InstanceStatus.FAILED,
            InstanceStatus.PROVISIONING,
            InstanceStatus.PENDING,
        }
    ),
    InstanceStatus.STOPPING: frozenset({InstanceStatus.STOPPED, InstanceStatus.TERMINATED}),
    InstanceStatus.STOPPED: frozenset({InstanceStatus.PENDING, InstanceStatus.TERMINATED}),
    InstanceStatus.FAILED: frozenset({InstanceStatus.TERMINATED}),
    InstanceStatus.TERMINATED: frozenset(),
}

#: States in which the instance holds GPUs on a node.
HOLDS_GPUS = frozenset(
    {InstanceStatus.PROVISIONING, InstanceStatus.RUNNING, InstanceStatus.STOPPING}
)
#: States a user sees as "still there" (not terminated).
ACTIVE = frozenset(set(InstanceStatus) - {InstanceStatus.TERMINATED})


def can_transition(current: InstanceStatus, new: InstanceStatus) -> bool:
    return new in ALLOWED_TRANSITIONS[current]
