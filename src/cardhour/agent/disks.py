"""A stopped instance's container disk, kept on its host (docs/dev/storage.md).

A single-node instance's spec names its disk (`core.hosts.disk_ref`: tagged with the host).
Asked to stop keeping it (`stopped` in the spec), the agent stops the container, commits its
file system to that image (everything written in it; not its mounts) and removes the
container; the workload reports `stopped`. A later spec naming a disk that is here runs from
it, with the ENTRYPOINT/CMD of the renter's own image (`ContainerSpec.config_image`). A disk
no wanted spec names any more (the instance was terminated, or started elsewhere) is removed
by the agent's tidy pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cardhour.core.hosts import DISK_REPOSITORY, PENDING, STOPPED
from cardhour.runtime.base import ContainerRuntime, ContainerStatus, RuntimeFailure

log = logging.getLogger("cardhour.agent")
GIB = 1024**3
#: a kept disk deeper than this is flattened when kept (each stop adds a layer; overlay
#: mounts at most ~125 of them)
MAX_LAYERS = 64
#: flattens run one at a time, off the converge pass (minutes for a large disk)
_FLATTEN = ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-flatten")


def keep(
    runtime: ContainerRuntime,
    name: str,
    box: str,
    spec: dict[str, Any],
    container: ContainerStatus | None,
    remove: Callable[[str], None],
) -> dict[str, Any]:
    """Stop workload `name`'s container `box` keeping its disk; its report. A failure (the
    commit: a full disk) leaves the container and says why; the next pass tries again."""
    disk = str(spec.get("disk") or "")
    try:
        if container is not None:
            if disk:
                runtime.stop(box)
                runtime.commit(box, disk)
                log.info("kept the disk of %s as %s", box, disk)
                if (runtime.image_layers(disk) or 0) > MAX_LAYERS:  # a layer per stop
                    _FLATTEN.submit(_flatten, runtime, disk)
            remove(box)
        size = runtime.image_size(disk) if disk else None
    except RuntimeFailure as exc:
        return {"workload": name, "state": PENDING, "error": f"cannot keep its disk: {exc}"}
    report: dict[str, Any] = {"workload": name, "state": STOPPED}
    if size is not None:  # what is billed while it is stopped: whole GiB, rounded up
        report["disk_gb"] = max(1, -(-size // GIB))
    return report


def _flatten(runtime: ContainerRuntime, disk: str) -> None:
    """On `_FLATTEN`'s thread: best effort (a failure leaves the deep disk, flattened at a
    later stop; a start or stop meanwhile is never held up, and its commit wins)."""
    try:
        runtime.squash(disk)
        log.info("flattened the disk %s into one layer", disk)
    except RuntimeFailure as exc:
        log.warning("cannot flatten the disk %s now: %s", disk, exc)


def source(runtime: ContainerRuntime, spec: dict[str, Any]) -> tuple[str, str | None]:
    """(the image to run, the image whose ENTRYPOINT/CMD it runs with): the kept disk with the
    renter's image's, when the spec names a disk that is here; else the renter's image."""
    image, disk = str(spec["image"]), spec.get("disk")
    if disk and runtime.image_labels(str(disk)) is not None:
        return str(disk), image
    return image, None


def sweep(runtime: ContainerRuntime, host: str, specs: list[dict[str, Any]]) -> None:
    """Remove the disks this host's agent kept (tagged with the host: several agents may
    share one engine, as on a test machine) that no wanted spec names."""
    named = {str(s["disk"]) for s in specs if s.get("disk")}
    for ref in runtime.images(DISK_REPOSITORY, {}):
        if ref.rsplit(":", 1)[-1] == host and ref not in named:
            log.info("removing the disk %s: no instance wants it here any more", ref)
            runtime.remove_image(ref)
