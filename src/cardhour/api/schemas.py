"""Request and response bodies of /api/v1 (`*Create` in, `*Read` out). Money as decimal strings.

Pure pydantic: the typed client (`cardhour.client`) imports these too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, StrictBool, StrictInt


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorRead(BaseModel):
    error: ErrorBody


class SignupCreate(BaseModel):
    email: str = Field(examples=["ada@example.com"])
    password: str = Field(min_length=1, examples=["correct horse battery"])


class LoginCreate(SignupCreate):
    key_name: str = Field(default="cli", max_length=100)


class UserRead(BaseModel):
    id: str
    email: str
    role: str
    created_at: datetime


class RoleSet(BaseModel):
    email: str = Field(examples=["rev@example.com"])
    role: str = Field(description="user | reviewer | admin", examples=["reviewer"])


class AuthRead(BaseModel):
    api_key: str = Field(description="Shown once; only its hash is stored.")
    user: UserRead


class CreditRead(BaseModel):
    kind: str = Field(description="trial_credit | sla_credit | grant_credit")
    balance: str
    expires_at: datetime | None
    gpu_models: list[str] = Field(description="Models it may pay for; empty: any.")
    expired: bool


class BalanceRead(BaseModel):
    currency: str
    available: str = Field(description="Cash + unexpired credits, rounded down to 0.01.")
    cash: str = Field(description="May be negative: usage that ran before an auto-stop.")
    trial_credit: str
    credits: list[CreditRead] = Field(description="Spent before cash, in this order.")
    held: str = Field(description="Set aside for instances at launch (one hour, or a plan).")
    committed_per_hour: str = Field(description="One hour of instances running or starting.")
    available_exact: str = Field(description="To the ledger's micro-unit (6 decimals).")
    low_balance_since: datetime | None = Field(
        description="Set while the money cannot cover the next minute: instances stop soon."
    )


class QuoteRead(BaseModel):
    count: int
    currency: str
    price_per_card_hour: str
    monthly_price_per_card_hour: str
    per_hour: str
    per_month_on_demand: str
    per_month_monthly_plan: str


class RecommendationRead(BaseModel):
    available: bool
    summary: str
    nodes: list[str]
    ib_leaves: list[str]
    interconnect: str
    reason: str | None = None
    expected_busbw_gbps: float | None = Field(
        default=None,
        description="All-reduce busbw a healthy placement reaches (nccl-tests, large messages).",
    )


class GpuSpecRead(BaseModel):
    name: str
    bf16_tflops: str
    memory_gb: int
    in_node_link: str
    nvlink: bool


class WeightsPlanRead(BaseModel):
    id: str = Field(examples=["llama3-70b"])
    mount: str = Field(examples=["/models/llama3-70b"])
    local: bool = Field(description="Cached in this data centre.")
    copy_seconds: int = Field(description="Estimated copy time when not local (0 when local).")


class OfferRead(BaseModel):
    gpu: str
    gpu_name: str
    data_centre: str
    data_centre_name: str
    ownership: str
    gpus_per_node: int
    total_gpus: int
    free_gpus: int
    free_nodes: int
    currency: str
    price_per_card_hour: str
    monthly_price_per_card_hour: str
    spec: GpuSpecRead
    quote: QuoteRead
    weights: WeightsPlanRead | None = Field(
        default=None, description="With `?weights=`: cached here, or copied in first."
    )
    recommendation: RecommendationRead | None = None


class InstanceCreate(BaseModel):
    gpu: str = Field(examples=["H100"])
    count: StrictInt = Field(default=1, examples=[1], description="GPUs (per node if `nodes`).")
    nodes: StrictInt = Field(
        default=1,
        description="A cluster of this many whole nodes (`count` = GPUs of one node), "
        "gang-placed on the fewest InfiniBand leaves; up to 128.",
    )
    name: str | None = Field(default=None, examples=["my-h100"])
    bare_metal: StrictBool = Field(
        default=False,
        description="Whole nodes held exclusively (`count` a multiple of the node's GPUs).",
    )
    weights: str | None = Field(
        default=None,
        description="Model weights to mount at /models/<id> (GET /offers?weights= says where "
        "they are cached); placement prefers a data centre that holds them.",
        examples=["llama3-70b"],
    )
    image: str | None = Field(default=None, examples=["pytorch-2.3-cuda12.3"])
    ssh_key: str | None = Field(default=None, description="OpenSSH public key.")
    plan: str = Field(
        default="on_demand",
        description="on_demand (billed per second, one hour held at launch) or monthly "
        "(30 days prepaid at 35% off, charged when it first runs; it keeps its GPUs).",
    )
    at_expiry: str = Field(
        default="stop", description="Monthly plan: `stop` or `on_demand` when the 30 days end."
    )
    quote_id: str | None = Field(
        default=None, description="A valid quote from POST /quotes: its price is honoured."
    )
    movable: StrictBool = Field(
        default=False,
        description="The operator may live-migrate this instance to defragment the fleet "
        "(the migration itself is not automated yet).",
    )


class EventRead(BaseModel):
    at: datetime
    from_status: str | None
    to_status: str
    reason: str | None


class StageRead(BaseModel):
    """One readiness stage of the instance's latest placement."""

    name: str = Field(
        description="allocated | booting | keys_injected | topology_detected | nccl_gate | ready"
    )
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None = Field(description="ok | failed | skipped; null while it runs")
    detail: dict[str, Any] = {}


class SlurmFilesRead(BaseModel):
    files: dict[str, str] = Field(
        description="`slurm.conf`, `gres.conf` and `topology.conf` for the cluster's own Slurm."
    )


class ImageRead(BaseModel):
    id: str = Field(examples=["pytorch-2.3-cuda12.3"])
    name: str
    description: str
    versions: dict[str, str] = Field(examples=[{"pytorch": "2.3.1", "cuda": "12.3"}])
    default: bool = Field(description="Used when a launch names no image.")


class ClusterNodeRead(BaseModel):
    rank: int
    role: str = Field(description="head | worker")
    hostname: str = Field(description="NAME for the head, NAME-workerN for the others.")
    node: str
    address: str
    gpus: int
    env: dict[str, str] = Field(
        description="MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE, WORLD_SIZE, "
        "NCCL_IB_HCA (or NCCL_IB_DISABLE)."
    )


class ClusterRead(BaseModel):
    nodes: list[ClusterNodeRead]
    hostfile: str = Field(description="`HOSTNAME slots=GPUS` lines (DeepSpeed / Open MPI).")


class InstanceRead(BaseModel):
    id: str
    name: str
    status: str
    status_reason: str | None
    gpu: str
    count: int
    image: str
    plan: str
    plan_until: datetime | None = Field(
        default=None, description="Monthly plan: prepaid until then."
    )
    at_expiry: str | None = Field(
        default=None, description="Monthly plan: `stop` or `on_demand` at its end."
    )
    movable: bool
    bare_metal: bool = False
    data_centre: str | None
    nodes: list[str]
    currency: str
    price_per_card_hour: str
    cost_so_far: str = Field(
        description="Usage charged so far, to the micro-unit (a monthly plan's prepaid price "
        "is not included: it shows in the statement)."
    )
    held: str = Field(
        default="0.000000", description="Set aside for it at launch or start, not yet used."
    )
    connection: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    events: list[EventRead] = []
    stages: list[StageRead] = Field(
        default=[], description="Readiness stages of the latest placement (detail views)."
    )
    weights: WeightsPlanRead | None = Field(
        default=None, description="Model weights asked for at launch, and where they come from."
    )
    cluster: ClusterRead | None = Field(
        default=None, description="Roles, hostnames and job environment (detail views)."
    )
    gate: dict[str, Any] | None = Field(
        default=None,
        description="The nccl-tests gate's figures: `nccl_busbw_gbps` per node, "
        "`across_nodes_gbps`, thresholds.",
    )


class SshKeyCreate(BaseModel):
    public_key: str = Field(
        max_length=20_000,
        description="One OpenSSH public key line (the .pub file); private keys are refused.",
        examples=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... ada@laptop"],
    )
    name: str | None = Field(
        default=None, max_length=64, description="Defaults to the key's comment."
    )


class SshKeyRead(BaseModel):
    id: str
    name: str
    type: str = Field(examples=["ssh-ed25519"])
    bits: int
    fingerprint: str = Field(description="As `ssh-keygen -l` prints it: SHA256:…")
    public_key: str
    created_at: datetime


class HealthRead(BaseModel):
    status: str
    version: str
    database: str
    backend: str


class ReplicaShareRead(BaseModel):
    """What one marketplace app replica holds on a node."""

    replica: str
    app: str | None = Field(description="The app's slug (null when the app is gone).")
    version: int
    gpus: list[int] = Field(description="GPU indices; empty for a CPU-only replica.")
    gpu_milli: int = Field(description="Milli-GPU held of each GPU in `gpus` (1000: whole).")
    cpu_milli: int
    memory_mib: int


class NodeRead(BaseModel):
    id: str
    data_centre: str
    gpu: str
    gpu_count: int
    used_gpus: list[int] = Field(description="GPU indices instances use.")
    app_replicas: list[ReplicaShareRead] = Field(
        default_factory=list, description="Shares marketplace app replicas hold."
    )
    free_gpus: int = Field(description="Whole cards no instance and no replica holds any of.")
    ib_leaf: str | None
    ib_spine: str | None
    schedulable: bool
    drained_reason: str | None = Field(
        default=None, description="Why the readiness gate drained it (until resumed)."
    )


class DefragMoveRead(BaseModel):
    instance: str = Field(description="The instance to move (its id).")
    from_node: str
    to_node: str
    gpus: list[int] = Field(description="The GPU indices it would take on `to_node`.")


class DefragRead(BaseModel):
    """A proposal only: nothing is moved. No moves and `fits_now`: the request fits as is."""

    request: str = Field(examples=["H100:8"])
    fits_now: bool
    moves: list[DefragMoveRead]
    target_nodes: list[str] = Field(description="Where the request fits once the moves are done.")
    reason: str | None = Field(description="Why no plan exists (null when there is one).")


class TopUpCreate(BaseModel):
    email: str = Field(max_length=320, examples=["ada@example.com"])
    amount: str = Field(
        max_length=40,
        description="Positive decimal string, at most 6 decimals and 1,000,000,000.",
        examples=["100.00"],
    )
    reference: str | None = Field(
        default=None,
        description="Your reference (e.g. a bank transfer id); the same reference is credited "
        "once. Generated when absent. 1-100 printable ASCII characters.",
        examples=["bank-2024-0001"],
    )


class TopUpRead(BaseModel):
    user_id: str
    email: str
    amount: str
    currency: str
    reference: str
    transfer_id: str = Field(description="The ledger transfer: `topup:<reference>`.")


class PaymentWebhookRead(BaseModel):
    received: bool = True
    duplicate: bool = Field(default=False, description="Delivered before; nothing moved now.")
    ignored: bool = Field(default=False, description="An event type cardhour does not act on.")


class QuoteCreate(BaseModel):
    gpu: str = Field(examples=["H100"])
    count: StrictInt = Field(default=1, examples=[8])
    plan: str = Field(default="on_demand", description="on_demand or monthly.")


class QuoteCreated(BaseModel):
    id: str
    gpu: str
    count: int
    plan: str
    currency: str
    price_per_card_hour: str = Field(description="The most any data centre with it charges now.")
    per_hour: str
    plan_total: str | None = Field(description="Monthly: 30 days × 24 h × count, charged once.")
    valid_until: datetime


class PriceSet(BaseModel):
    gpu: str = Field(examples=["H100"])
    price: str = Field(description="On-demand CNY per card-hour.", examples=["2.10"])
    data_centre: str | None = Field(default=None, description="Default: every one with it.")
    effective_from: datetime | None = Field(default=None, description="Default: now.")


class PriceRead(BaseModel):
    gpu: str
    data_centre: str
    currency: str
    on_demand: str
    monthly: str
    effective_from: datetime
    current: bool = Field(description="In force now; false: a scheduled change.")


class CreditCreate(BaseModel):
    email: str
    kind: str = Field(description="sla_credit or grant_credit.")
    amount: str = Field(examples=["50.00"])
    expires_at: datetime | None = None
    gpu_models: list[str] = Field(default=[], description="Models it may pay for; empty: any.")
    reference: str | None = Field(default=None, description="Idempotency: granted once.")


class CreditCreated(BaseModel):
    user_id: str
    email: str
    kind: str
    amount: str
    currency: str
    expires_at: datetime | None
    gpu_models: list[str]
    reference: str
