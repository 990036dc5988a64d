"""Persistent volumes (`/volumes`) and how a launch mounts them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class VolumeMount(BaseModel):
    """One of the launch's `volumes` as an object (the string form is `NAME:/path`)."""

    model_config = ConfigDict(extra="forbid")

    volume: str = Field(examples=["data"])
    path: str = Field(examples=["/data"])


class VolumeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        examples=["data"],
        description="1-63 lowercase letters, digits and '-'; unique among your volumes.",
    )
    size: str | StrictInt = Field(
        examples=["100G"],
        description="Whole GiB: `100`, `100G`, `100GiB` or `2T` (1 T = 1,024 GiB), up to the "
        "platform's largest volume. Enforced: writing past it fails with ENOSPC in the "
        "container.",
    )
    data_centre: str = Field(
        examples=["bj1"], description="Where it lives; instances mounting it run there."
    )


class VolumeEventRead(BaseModel):
    at: datetime
    kind: str = Field(
        description="created | attached | detached | delete_requested | deleted | overdue | "
        "warned | kept"
    )
    message: str


class VolumeRead(BaseModel):
    id: str
    name: str
    data_centre: str
    size_gb: int
    state: str = Field(description="available | attached | deleting | deleted")
    instance_id: str | None = Field(description="The instance it is attached to.")
    mount_path: str | None
    host: str | None = Field(
        description="The host its data is on (null until an instance first ran with it)."
    )
    shared: bool = Field(
        description="On the data centre's shared storage (any host there can mount it); "
        "otherwise on its host's own disk, and its instances run on that host."
    )
    currency: str
    price_per_gb_hour: str
    hourly: str = Field(description="What one hour of it costs.")
    charged: str = Field(description="Charged so far, to the micro-unit.")
    created_at: datetime
    deleted_at: datetime | None = None
    reason: str | None = None
    overdue_since: datetime | None = Field(
        default=None,
        description="Your balance ran out then: the volume is kept for the retention period, "
        "then deleted unless the balance is positive again.",
    )
    events: list[VolumeEventRead] = Field(
        default_factory=list, description="What happened to it (the detail view)."
    )


class InstanceStart(BaseModel):
    """How a stopped instance starts (`POST /instances/{id}/start`; no body: `auto`)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "wait", "no_gpu", "move"] = Field(
        default="auto",
        description="For an instance whose stop kept its disk on a host: `auto` starts there "
        "when its GPUs are free, else answers 409 `start_choice_needed` with the choices; "
        "`wait` queues for that host's GPUs; `no_gpu` runs from the disk now without GPUs at "
        "the price per hour of the choices; `move` copies the disk to a host of the data "
        "centre with the GPUs free (not billed) and starts there.",
    )


class StartChoice(BaseModel):
    mode: str
    detail: str
    price_per_hour: str | None = None  # no_gpu
    currency: str | None = None
    available: bool | None = None  # move: whether a host with the GPUs free was found
    to: str | None = None  # move: the host
    copy_seconds: int | None = None  # move: the estimate of the copy


class StartChoicesRead(BaseModel):
    """What a start of the stopped instance can do now (also the details of a 409
    `start_choice_needed`). `disk_host` null: it kept no disk; a start goes anywhere."""

    disk_host: str | None
    disk_gb: int | None
    gpus_free: bool
    choices: list[StartChoice]
