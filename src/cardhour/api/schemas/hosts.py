"""Hosts: enrolment by an admin, and what a host agent sends and gets back.

Pure pydantic: the typed client and the agent (`cardhour.agent`) import these too. The agent's
bodies refuse unknown fields, so an agent and a control plane of different versions fail loudly
rather than drop what the other said.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: an IP address (v4 or v6) or a DNS name: no spaces, no newlines, nothing an ssh config reads
ADDRESS = r"^[A-Za-z0-9:][A-Za-z0-9.:-]*$"
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostCreate(_Strict):
    name: str = Field(examples=["bj1-h100-017"], description="The host's node id in the fleet.")
    data_centre: str = Field(examples=["bj1"])
    ib_leaf: str | None = Field(
        default=None, max_length=64, pattern=NAME, description="Its InfiniBand leaf, if any."
    )
    ib_spine: str | None = Field(
        default=None, max_length=64, pattern=NAME, description="The leaf's spine."
    )


class HostRead(BaseModel):
    name: str
    data_centre: str
    state: str = Field(description="waiting (not joined yet) | ready | lost | removed")
    lost_reason: str | None = None
    gpu: str | None = Field(description="The catalog GPU model its GPUs are; null: none known.")
    gpus: int
    gpu_names: list[str] = []
    address: str | None
    runtime: str | None
    standin: bool = Field(description="Stand-in GPUs (a test machine), not real ones.")
    ib_leaf: str | None
    ib_spine: str | None
    containers: int = Field(description="Containers wanted on it.")
    joined_at: datetime | None
    last_seen_at: datetime | None


class HostEnrolled(BaseModel):
    host: HostRead
    token: str = Field(description="One-time join token (shown once; SHA-256 kept).")
    expires_at: datetime
    command: str = Field(description="What to run on the server to join it.")


class AgentJoin(_Strict):
    token: str


class AgentJoined(BaseModel):
    host: str
    credential: str = Field(description="The host credential (shown once; SHA-256 kept).")
    heartbeat_seconds: int


class ContainerReportIn(_Strict):
    workload: str = Field(max_length=64)
    state: str = Field(description="pending | running | exited | failed | stopped")
    ports: dict[str, int] = Field(default={}, description="Container port -> host port.")
    exit_code: int | None = None
    error: str = ""
    logs: str = ""
    probes: dict[str, str | None] | None = Field(
        default=None,
        description="authorized_keys, all_reduce: what the container printed "
        "(all_reduce_unavailable instead: why it could not run); absent until the container "
        "is ready to answer (keys installed, sshd greeting).",
    )
    peers: str | None = Field(
        default=None, description="The cluster peers' digest the container let in (clusters)."
    )
    disk_gb: int | None = Field(
        default=None, ge=0, description="Stopped: the size of its kept disk, in whole GiB."
    )
    bytes: int | None = Field(
        default=None,
        ge=0,
        description="A kept disk's save for its move: the bytes written so far (the archive's "
        "size once done).",
    )


class AgentReport(_Strict):
    host: str
    inventory: dict[str, Any] | None = Field(
        default=None,
        description="gpus (nvidia-smi query rows), topology (`nvidia-smi topo -m`), ibstat, "
        "cpus, memory_mb, disk_gb (the size of the agent's state dir's file system); sent on "
        "the first report and whenever it changes.",
    )
    address: str | None = Field(
        default=None,
        max_length=253,
        pattern=ADDRESS,
        description="Where its published ports answer: an IP address or a DNS name (it goes "
        "into renters' ssh configs, so nothing else).",
    )
    runtime: str | None = Field(default=None, max_length=16, pattern=NAME)
    standin: bool | None = None
    containers: list[ContainerReportIn] | None = Field(
        default=None,
        description="Each wanted container as the engine holds it; absent or null: not known "
        "yet (an agent that just started and has not looked), so nothing is concluded from it.",
    )


class AgentDesired(BaseModel):
    host: str
    version: int = Field(description="Moves whenever the wanted containers change.")
    containers: list[dict[str, Any]]
    heartbeat_seconds: int
    held_seconds: float = Field(
        0.0,
        description="How long the server held this answer waiting for work (a long poll ends "
        "when its wait does, up to 1/16 of it early: agents answered together come back apart).",
    )
