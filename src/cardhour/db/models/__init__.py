"""Tables as SQLAlchemy 2 rows, one module per capability, all on one `Base`.

Importing this package registers every table on `Base.metadata` (migrations and the schema
check rely on it). Money columns are BigInteger micro-units; never floats.
"""

from cardhour.db.models.accounts import (
    ApiKeyRow,
    AuthEventRow,
    AuthThrottleRow,
    NotificationRow,
    SshKeyRow,
    UserRow,
)
from cardhour.db.models.base import TS, Base
from cardhour.db.models.billing import (
    LedgerAccountRow,
    LedgerTransferRow,
    PriceVersionRow,
    QuoteRow,
    UsageSegmentRow,
)
from cardhour.db.models.compute import (
    AllocationRow,
    FleetInventoryRow,
    InstanceEventRow,
    InstanceRow,
    InstanceStageRow,
    NodeRow,
)
from cardhour.db.models.grants import (
    GrantMemberRow,
    GrantRow,
    ProposalEventRow,
    ProposalMemberRow,
    ProposalReviewerRow,
    ProposalReviewRow,
    ProposalRow,
)
from cardhour.db.models.hosts import BRIEF_COLUMNS, HostContainerRow, HostDirectoryRow, HostRow
from cardhour.db.models.idempotency import IdempotencyKeyRow
from cardhour.db.models.marketplace import (
    AppCallRow,
    AppReplicaRow,
    AppRow,
    AppVersionRow,
    PayoutRow,
    gpu_indices,
)
from cardhour.db.models.storage import VolumeEventRow, VolumeRow

__all__ = [
    "TS",
    "AllocationRow",
    "ApiKeyRow",
    "AuthEventRow",
    "AuthThrottleRow",
    "AppCallRow",
    "AppReplicaRow",
    "AppRow",
    "AppVersionRow",
    "Base",
    "FleetInventoryRow",
    "GrantMemberRow",
    "GrantRow",
    "BRIEF_COLUMNS",
    "HostContainerRow",
    "HostDirectoryRow",
    "HostRow",
    "IdempotencyKeyRow",
    "InstanceEventRow",
    "InstanceRow",
    "InstanceStageRow",
    "LedgerAccountRow",
    "LedgerTransferRow",
    "NodeRow",
    "NotificationRow",
    "PayoutRow",
    "PriceVersionRow",
    "ProposalEventRow",
    "ProposalMemberRow",
    "ProposalReviewRow",
    "ProposalReviewerRow",
    "ProposalRow",
    "QuoteRow",
    "SshKeyRow",
    "UsageSegmentRow",
    "UserRow",
    "VolumeEventRow",
    "VolumeRow",
    "gpu_indices",
]
