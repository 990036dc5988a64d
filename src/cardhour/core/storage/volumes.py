"""Persistent volumes, the pure part: names, sizes, mount requests, what a volume's storage
costs, and the shape the control plane asks a host to attach (docs/dev/storage.md).

A volume lives in one data centre and outlives every instance; it is attached read-write to
at most one instance at a time. Sizes are whole GiB; a volume's cost is its size × the time
from creation to deletion × the data centre's storage price per GB-hour, rated on the
cumulative time (half up to the micro-unit), as usage is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money, rate_micros

#: volume names: what `cardhour volumes create NAME` accepts (unique per owner while it lives)
NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_SIZE = re.compile(r"\s*([0-9]{1,9})\s*(g|gb|gib|t|tb|tib)?\s*", re.IGNORECASE)
#: the most volumes one instance mounts
MAX_MOUNTS = 8
#: paths a volume may not be mounted at (the system's, or the platform's own in the container)
RESERVED_MOUNTS = (
    "/",
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/boot",
    "/run",
    "/tmp",
    "/var",
    "/root/.ssh",
    "/.cardhour",
)
_MOUNT = re.compile(r"/[A-Za-z0-9._/-]{0,254}")

#: a volume's states: `available` (not attached), `attached` (to `instance_id`), `deleting`
#: (asked to go; its host removes its data), `deleted`
AVAILABLE, ATTACHED, DELETING, DELETED = "available", "attached", "deleting", "deleted"
#: a stopped instance's kept container disk (kind `disk`), billed as storage until it starts
KEPT = "kept"
VOLUME, DISK = "volume", "disk"  # the kinds
#: a host's wanted item that is no container: remove a deleted volume's data
DELETE_TASK = "volume-delete"
#: the kind of a wanted task that saves a kept disk for its move (`agent.disk_copies`)
EXPORT_TASK = "disk-export"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(
            f"bad volume name {name!r}: 1-63 lowercase letters, digits and '-', starting and "
            "ending with a letter or digit",
            field="name",
        )
    return name


def parse_size(text: str | int, maximum_gb: int) -> int:
    """A size in whole GiB from `100`, `100G`, `100GB`, `100GiB` or `2T` (1 T = 1,024 G);
    InvalidInput for zero, a negative, a fraction, anything else, or more than `maximum_gb`."""
    raw = str(text)
    match = _SIZE.fullmatch(raw) if not isinstance(text, bool) else None
    if match is None:
        raise InvalidInput(
            f"bad size {raw[:30]!r}: a whole number of GiB such as 100G or 2T", field="size"
        )
    size = int(match.group(1)) * (1024 if (match.group(2) or "g")[0].lower() == "t" else 1)
    if size <= 0:
        raise InvalidInput("size: a volume holds at least 1 GiB", field="size")
    if size > maximum_gb:
        raise InvalidInput(
            f"size: {size} GiB is more than this platform's largest volume ({maximum_gb} GiB)",
            field="size",
        )
    return size


@dataclass(frozen=True)
class MountRequest:
    """`NAME:/path` of `launch --volume`: the owner's volume `volume` at `path`."""

    volume: str
    path: str


def check_path(path: str) -> str:
    """An absolute path in the container, not a system folder or the platform's own."""
    clean = "/" + "/".join(p for p in path.split("/") if p)
    dots = any(part in (".", "..") for part in path.split("/"))
    if not _MOUNT.fullmatch(path) or dots or clean != path.rstrip("/"):
        raise InvalidInput(
            f"volumes: bad mount path {path[:60]!r}: an absolute path of letters, digits and "
            "._-/ such as /data",
            field="volumes",
        )
    for reserved in RESERVED_MOUNTS:
        if clean == reserved or (reserved != "/" and clean.startswith(reserved + "/")):
            raise InvalidInput(
                f"volumes: {clean} is a system path; mount the volume elsewhere, e.g. /data",
                field="volumes",
            )
    return clean


def parse_mounts(items: Sequence[str | Mapping[str, str]]) -> list[MountRequest]:
    """Mount requests from `NAME:/path` strings or `{"volume", "path"}` objects; at most
    `MAX_MOUNTS`, no volume and no path twice."""
    if len(items) > MAX_MOUNTS:
        raise InvalidInput(f"volumes: {len(items)} volumes, at most {MAX_MOUNTS}", field="volumes")
    found: list[MountRequest] = []
    for item in items:
        if isinstance(item, str):
            name, sep, path = item.partition(":")
            if not sep:
                raise InvalidInput(
                    f"volumes: {item[:70]!r} is not NAME:/path (e.g. data:/data)",
                    field="volumes",
                )
        else:
            name, path = str(item.get("volume", "")), str(item.get("path", ""))
        request = MountRequest(check_name(name), check_path(path))
        if any(m.volume == request.volume for m in found):
            raise InvalidInput(f"volumes: {name} is listed twice", field="volumes")
        if any(m.path == request.path for m in found):
            raise InvalidInput(f"volumes: {request.path} is used twice", field="volumes")
        found.append(request)
    return found


def storage_cost(size_gb: int, seconds: int, price_gb_hour_micros: int) -> int:
    """What `size_gb` held for `seconds` costs at the price per GB-hour, in micro-units, rounded
    half up (rate the cumulative time, so the charge never strays half a micro-unit)."""
    if seconds <= 0:
        return 0
    return rate_micros(price_gb_hour_micros, size_gb * seconds * 1000)  # GB-s as card-s


@dataclass(frozen=True)
class Attachment:
    """A volume as a host's container spec carries it (JSON `volumes` items): `store` is the
    data centre's shared storage path, or None for the host's own volume folder; `formatted`:
    the volume held data before (its image missing is an error then, never a fresh disk)."""

    id: str
    size_gb: int
    path: str
    store: str | None
    formatted: bool

    def spec(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "size_gb": self.size_gb,
            "path": self.path,
            "store": self.store,
            "formatted": self.formatted,
        }


class StorageFile(BaseModel):
    """The fleet file's `storage` section: the price per GB-hour (every data centre, or per
    data centre in `prices`), the largest volume, and the data centres whose hosts all mount
    one shared storage path (`shared_paths`; elsewhere a volume lives on the host that first
    ran it, and its instances are placed there)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    price_gb_hour: str = "0.0003"
    prices: dict[str, str] = {}
    max_volume_gb: int = Field(default=10_240, gt=0)
    shared_paths: dict[str, str] = {}
    #: per hour, a stopped instance started without GPUs to reach its disk (half a CPU,
    #: 512 MB: `core.hosts.share` of no GPU)
    no_gpu_price: str = "0.10"
    #: what a kept disk's move to another host copies per second (save on its host, load on
    #: the other, through the shared path): the estimate shown before a move
    copy_mb_per_s: int = Field(default=40, gt=0)

    @field_validator("price_gb_hour", "prices", "no_gpu_price")
    @classmethod
    def _positive(cls, value: str | dict[str, str]) -> str | dict[str, str]:
        for price in [value] if isinstance(value, str) else value.values():
            if Money.parse(price).micros <= 0:
                raise ValueError(f"a storage price must be positive, not {price}")
        return value

    @field_validator("shared_paths")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for dc, path in value.items():
            if not path.startswith("/"):
                raise ValueError(f"shared storage path of {dc}: {path!r} is not absolute")
        return value


@dataclass(frozen=True)
class Storage:
    """The storage offer of a fleet (`StorageFile`, prices in the fleet's currency)."""

    currency: str
    price_gb_hour: Money
    prices: dict[str, Money] = field(default_factory=dict)
    max_volume_gb: int = 10_240
    shared_paths: dict[str, str] = field(default_factory=dict)
    no_gpu_price: Money = field(default_factory=lambda: Money.parse("0.10"))
    copy_mb_per_s: int = 40

    @classmethod
    def from_file(cls, spec: StorageFile, currency: str) -> Storage:
        return cls(
            currency,
            Money.parse(spec.price_gb_hour, currency),
            {dc: Money.parse(p, currency) for dc, p in spec.prices.items()},
            spec.max_volume_gb,
            dict(spec.shared_paths),
            Money.parse(spec.no_gpu_price, currency),
            spec.copy_mb_per_s,
        )

    def copy_seconds(self, size_gb: int) -> int:
        """The estimate of a kept disk's move: `size_gb` at `copy_mb_per_s`, whole seconds
        rounded up (at least 1)."""
        return max(1, -(-size_gb * 1024 // self.copy_mb_per_s))

    def price(self, data_centre: str) -> Money:
        """Per GB-hour in `data_centre`."""
        return self.prices.get(data_centre, self.price_gb_hour)

    def shared_path(self, data_centre: str) -> str | None:
        """The storage path every host of `data_centre` mounts; None: hosts' own folders."""
        return self.shared_paths.get(data_centre)
