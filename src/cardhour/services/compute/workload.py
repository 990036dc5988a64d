"""A renter's workload on an instance: the image, command, environment variables and ports
chosen at launch (what RunPod or vast.ai let a renter choose).

Checked at launch by the catalog (`Catalog.launch_image`: a catalog id, or an OCI reference from
an allowed registry) and `core.workload.spec`; stored on the instance row as text: `env` a JSON
object in the order given, `ports` a JSON list, each None when empty. The provisioning claim
and the read model decode them with `of`. Where the backend publishes the ports, its connection
details say so (`published`, see `backends.base.PollResult`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cardhour.core.catalog import Catalog
from cardhour.core.workload import spec
from cardhour.db.models import InstanceRow


@dataclass(frozen=True)
class Workload:
    image: str  # a catalog image's id, or a fully qualified OCI reference
    command: str | None = None  # run by `sh -c`; None: the container idles
    env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)


def checked(
    catalog: Catalog,
    image: str | None,
    command: str | None,
    env: Mapping[str, str],
    ports: Iterable[int],
) -> Workload:
    """The workload a launch asks for, checked; InvalidInput naming the field otherwise."""
    return Workload(
        catalog.launch_image(image),
        spec.check_command(command),
        spec.check_env(env),
        spec.check_ports(ports),
    )


def columns(work: Workload) -> dict[str, Any]:
    """The instance row's columns for `work`."""
    return {
        "image": work.image,
        "command": work.command,
        "env": json.dumps(work.env) if work.env else None,
        "ports": json.dumps(work.ports) if work.ports else None,
    }


def of(row: InstanceRow) -> Workload:
    """The workload stored on `row` (`columns` read back)."""
    return Workload(
        row.image,
        row.command,
        json.loads(row.env) if row.env else {},
        json.loads(row.ports) if row.ports else [],
    )
