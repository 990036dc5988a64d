"""Offers, instances and clusters, images, nodes and defragmentation.

Pure pydantic: the typed client (`cardhour.client`) imports these too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator
from pydantic_core import PydanticCustomError

from cardhour.api.schemas.billing import QuoteRead
from cardhour.api.schemas.storage import VolumeMount
from cardhour.core.errors import InvalidInput
from cardhour.core.storage.volumes import MAX_MOUNTS
from cardhour.core.workload import spec

T = TypeVar("T")


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
    """A launch. Fields it does not know are refused (422), never ignored."""

    model_config = ConfigDict(extra="forbid")

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
    image: str | None = Field(
        default=None,
        max_length=255,
        description="A catalog image's id (GET /images; default: the first), or an OCI "
        "reference `[registry/]repository[:tag][@digest]` from a registry the fleet allows "
        "(stored fully qualified: `ubuntu:24.04` is docker.io/library/ubuntu:24.04).",
        examples=["pytorch-2.3-cuda12.3", "docker.io/vllm/vllm-openai:v0.5.4"],
    )
    command: str | None = Field(
        default=None,
        description=f"Run by `sh -c` in the container (at most {spec.MAX_COMMAND} characters); "
        "default: none (the container idles with its sshd).",
        examples=["python -m http.server 8888"],
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description=f"Environment variables (at most {spec.MAX_ENV}): names "
        f"`[A-Za-z_][A-Za-z0-9_]*`, not starting `{spec.RESERVED_PREFIX}`; values at most "
        f"{spec.MAX_ENV_VALUE} characters, no NUL, no line break.",
        examples=[{"HF_HOME": "/models"}],
    )
    ports: list[StrictInt] = Field(
        default_factory=list,
        description=f"Container ports to publish (1-65535, distinct, at most {spec.MAX_PORTS}; "
        "not 22: sshd has it). Where each is reachable shows in `published` once it runs.",
        examples=[[8888]],
    )
    data_centre: str | None = Field(
        default=None,
        description="Where it must run (a data centre of `GET /offers`); default: anywhere, or "
        "where its volumes are.",
        examples=["bj1"],
    )
    volumes: list[str | VolumeMount] = Field(
        default_factory=list,
        description=f"Your volumes to mount read-write: `NAME:/path` or `{{volume, path}}` (at "
        f"most {MAX_MOUNTS}). The instance runs in their data centre (on their host, for a "
        "volume on a host's own disk); a volume is attached to one instance at a time, until "
        "that instance is terminated.",
        examples=[["data:/data"]],
    )
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

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        return _checked(spec.check_command, value)

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked(spec.check_env, value)

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[int]) -> list[int]:
        return _checked(spec.check_ports, value)


def _checked(check: Callable[[Any], T], value: Any) -> T:
    """`core.workload.spec`'s rule as a validation error whose message names the field
    (type `invalid_input`: the API's error handler shows it as it is)."""
    try:
        return check(value)
    except InvalidInput as exc:
        raise PydanticCustomError("invalid_input", exc.message) from None


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
    ref: str = Field(
        default="",
        description="The OCI reference a host runs for it.",
        examples=["localhost/cardhour/pytorch-2.3-cuda12.3:latest"],
    )


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


class SshRead(BaseModel):
    host: str
    port: int
    user: str


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
    no_gpu: bool = Field(
        default=False,
        description="Started without GPUs to reach its kept disk (CPU only): "
        "`price_per_card_hour` is then per hour.",
    )
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
    connection: dict[str, Any] | None = Field(
        description="The backend's connection details as it reported them (`ssh` there is "
        "the command line); null until it runs."
    )
    created_at: datetime
    updated_at: datetime
    command: str | None = Field(default=None, description="As launched (`sh -c`).")
    env: dict[str, str] = Field(default_factory=dict, description="As launched.")
    ports: list[int] = Field(
        default_factory=list, description="Container ports asked to be published."
    )
    volumes: list[VolumeMount] = Field(
        default_factory=list, description="The volumes attached to it, where they are mounted."
    )
    ssh: SshRead | None = Field(
        default=None, description="Where the instance's sshd answers, once it runs."
    )
    published: dict[str, str] = Field(
        default_factory=dict,
        description='Container port → "host:port" where it is reachable, for the ports the '
        "backend published (empty on backends that publish none, e.g. the simulator).",
        examples=[{"8888": "gpu-07.example.net:30412"}],
    )
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
