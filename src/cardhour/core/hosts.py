"""Hosts as the control plane sees them: what an agent reports, the node it serves as, and the
container it is asked to run. Pure: the hosts backend (`backends.hosts`) and the hosts services
(`services.hosts`) share these shapes; the agent speaks them as JSON.

A host is one node: its name is the node id. Its GPUs (one model per node) come from the
agent's `nvidia-smi` inventory, matched to the catalog's models by name; its InfiniBand rails
from `ibstat` (active InfiniBand ports, the slowest one's rate per rail); its leaf and spine
from the admin who enrolled it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from cardhour.core.errors import InvalidInput
from cardhour.core.gpus import GpuModel
from cardhour.core.parsers import hwtopo
from cardhour.core.topology import NodeSpec

#: host (= node) names: what `cardhour admin hosts add NAME` accepts
NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
#: container states an agent reports (`pending`: wanted, not made yet; `stopped`: asked to
#: stop keeping its disk, and it did: the container is gone, its disk kept as an image)
PENDING, RUNNING, EXITED, FAILED, STOPPED = "pending", "running", "exited", "failed", "stopped"
STATES = (PENDING, RUNNING, EXITED, FAILED, STOPPED)
#: where a single-node instance's container disk is kept on its host while it is stopped
DISK_REPOSITORY = "localhost/cardhour-disk"


#: where a kept disk being moved to another host is named while it is saved and loaded
MOVE_REPOSITORY = "localhost/cardhour-move"


def disk_ref(instance_id: str, host: str) -> str:
    """The image a stopped instance's container disk is kept as on `host` (`DISK_REPOSITORY`,
    tagged with the host: several agents may share one engine, as on a test machine, and a
    moved disk has one name on each host)."""
    return f"{DISK_REPOSITORY}/{instance_id}:{host}"


#: the longest text field of a container report (a report is not a log shipper): the control
#: plane refuses more, the agent keeps the last this many characters of a longer one
MAX_REPORT_TEXT = 64_000


def clamped(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with each text field cut to its last `MAX_REPORT_TEXT` characters: the control
    plane refuses a longer one, and a refused report would be sent again every heartbeat."""
    return {
        key: value[-MAX_REPORT_TEXT:] if isinstance(value, str) else value
        for key, value in report.items()
    }


def inventory_key(text: str) -> str:
    """What changes whenever a host's inventory (its JSON text as stored) does: 16 hex
    digits of its SHA-256 ("" for none)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise InvalidInput(
            f"bad host name {name!r}: 1-63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class HostInfo:
    """A joined host: where it is, what it reported last, and why it is lost (None: alive)."""

    name: str
    data_centre: str
    ib_leaf: str | None
    ib_spine: str | None
    address: str | None
    inventory: dict[str, Any]
    standin: bool
    lost: str | None = None
    inventory_key: str = ""  # changes whenever `inventory` does (what caches key on)


@dataclass(frozen=True)
class ContainerInfo:
    """One workload's container on one host, wanted and as last reported."""

    host: str
    attempt: int
    wanted: bool
    state: str
    spec: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)


def gpu_model(names: list[str], models: list[GpuModel]) -> GpuModel | None:
    """The catalog model of a node whose GPUs `nvidia-smi` names `names` (all one model): the
    model whose id, name or an alias appears in the name once spaces, dashes and case are
    ignored, the longest such key winning ("NVIDIA H100 80GB HBM3" → H100). None when the
    GPUs differ or no model matches."""
    if not names or len(set(names)) != 1:
        return None
    squashed = _squash(names[0])
    best: tuple[int, GpuModel] | None = None
    for model in models:
        for key in (model.id, model.name, *model.aliases):
            k = _squash(key)
            if k and k in squashed and (best is None or len(k) > best[0]):
                best = (len(k), model)
    return best[1] if best else None


def _squash(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).lower()


def node_spec(host: HostInfo, models: list[GpuModel]) -> NodeSpec | None:
    """The node a host serves as, from its last inventory; None while it has reported no GPU
    the catalog knows (it is not for sale then)."""
    gpus = host.inventory.get("gpus") or []
    model = gpu_model([str(g.get("name", "")) for g in gpus], models)
    if model is None:
        return None
    rails, gbps = 0, 0
    ib_text = host.inventory.get("ibstat")
    if ib_text:
        try:
            ports = [p for p in hwtopo.parse_ibstat(str(ib_text)).infiniband if p.up]
        except InvalidInput:
            ports = []
        rails = len(ports)
        gbps = int(min(p.rate_gbps for p in ports)) if ports else 0
    return NodeSpec(
        id=host.name,
        data_centre=host.data_centre,
        gpu_model=model.id,
        gpu_count=len(gpus),
        cpus=int(host.inventory.get("cpus") or 0),
        memory_gb=int(host.inventory.get("memory_mb") or 0) // 1024,
        ib_leaf=host.ib_leaf if rails else None,
        ib_spine=host.ib_spine if rails else None,
        ib_rails=rails,
        ib_gbps_per_rail=gbps,
    )


def share(node: NodeSpec, gpus: int) -> tuple[float, int]:
    """(CPUs, memory MB) a container of `gpus` of the node's GPUs gets: in proportion, at
    least half a CPU and 512 MB."""
    part = gpus / node.gpu_count if node.gpu_count else 1.0
    cpus = max(0.5, round(node.cpus * part, 2)) if node.cpus else 0.5
    memory = max(512, int(node.memory_gb * 1024 * part)) if node.memory_gb else 512
    return cpus, memory
