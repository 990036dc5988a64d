"""A kept disk's move to another host of its data centre (docs/dev/storage.md), through the
data centre's shared storage path:

- the host the disk is kept on has a wanted task (`EXPORT_TASK`): its agent names the disk
  `MOVE_REPOSITORY/<workload>` and saves it to the archive under a `.part` name, then
  renames it into place (a complete archive is never half written) and drops the move name;
- the host placed has a wanted container whose spec names its disk (`disk`, on this host) and
  where to copy it from (`disk_copy`): while the disk is not here, its agent waits for the
  archive, loads it, names it as this host's disk and removes the archive; then it runs.

Each save and load runs on a thread of its own (a disk of hundreds of GB takes minutes); the
agent's pass only asks how far it got. The original disk is untouched throughout: it is let go
only once the instance runs on the new host (`HostsBackend.started`), so a move interrupted at
any point (a stop, a crash of either agent, a failed load) leaves it where it was.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cardhour.agent import volumes as volume_tasks
from cardhour.agent.volumes import Busy, Volumes
from cardhour.core.hosts import EXITED, FAILED, MOVE_REPOSITORY, RUNNING
from cardhour.core.storage.volumes import EXPORT_TASK
from cardhour.runtime.base import ContainerRuntime, RuntimeFailure

log = logging.getLogger("cardhour.agent")


def move_ref(archive: str) -> str:
    """The name a disk has while it is saved to, or loaded from, `archive`."""
    return f"{MOVE_REPOSITORY}/{Path(archive).stem}"


def run_tasks(
    copies: DiskCopies | None,
    volumes: Volumes | None,
    tasks: list[dict[str, Any]],
    desired: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Do this pass's wanted tasks, `EXPORT_TASK`s and the volumes' (`agent.volumes.run_task`):
    their reports. `desired`: every spec wanted here this pass."""
    if copies is not None:
        copies.wanted(tasks, desired)
    return [
        copies.export(task)
        if task.get("kind") == EXPORT_TASK and copies is not None
        else volume_tasks.run_task(volumes, task)
        for task in tasks
    ]


class DiskCopies:
    """This agent's saves and loads of kept disks on the move, by archive path."""

    def __init__(self, runtime: ContainerRuntime) -> None:
        self.runtime = runtime
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="disk-copy")
        self._jobs: dict[str, Future[None]] = {}
        #: archives saved whose task is still wanted: the loader removes an archive it loaded,
        #: which must not be saved again (an agent restarted in between does save it again)
        self._saved: set[str] = set()
        self._wanted: set[str] = set()  # the archives of the export tasks wanted now
        self._disks: set[str] = set()  # the disks the specs wanted now name
        self._failed: dict[str, str] = {}  # archive -> why its save failed, while still wanted

    def export(self, task: dict[str, Any]) -> dict[str, Any]:
        """Report on a wanted `EXPORT_TASK` as a container would: `running` while its disk is
        saved, `exited` with code 0 once its archive is complete, `failed` with the reason."""
        report: dict[str, Any] = {"workload": str(task["workload"])}
        try:
            image, archive = str(task["image"]), str(task["archive"])
        except KeyError as exc:
            return report | {"state": FAILED, "error": f"the agent cannot read its spec: {exc!r}"}
        done = report | {"state": EXITED, "exit_code": 0}
        if archive in self._saved:
            return done
        if Path(archive).exists():
            self._saved.add(archive)
            return done | {"bytes": Path(archive).stat().st_size}
        failure = self._settled(archive)
        if failure is not None:  # reported until the task goes (the move is given up)
            self._failed[archive] = failure
        if archive in self._failed:
            return report | {"state": FAILED, "error": self._failed[archive]}
        if archive in self._saved:  # saved since the first look
            return done
        if archive not in self._jobs:
            self._jobs[archive] = self._pool.submit(self._save, image, archive)
        part = Path(f"{archive}.part")
        return report | {"state": RUNNING, "bytes": part.stat().st_size if part.exists() else 0}

    def wanted(self, tasks: list[dict[str, Any]], desired: list[dict[str, Any]]) -> None:
        """The tasks and specs wanted on this pass. A saved archive whose task is gone is
        removed (the move was given up before its load; a loaded one is gone already) and
        forgotten."""
        self._wanted = {str(t.get("archive")) for t in tasks if t.get("kind") == EXPORT_TASK}
        self._disks = {str(s["disk"]) for s in desired if s.get("disk")}
        for archive in self._saved - self._wanted:
            Path(archive).unlink(missing_ok=True)
        self._saved &= self._wanted
        self._failed = {a: why for a, why in self._failed.items() if a in self._wanted}

    def fetch(self, spec: dict[str, Any]) -> None:
        """Make sure the disk `spec` names is here, copying it in if the spec says from where.
        Busy while the copy is on its way; RuntimeFailure when it failed (the next pass of a
        spec still wanted tries again)."""
        disk, copy = str(spec["disk"]), spec.get("disk_copy")
        if not copy or self.runtime.image_labels(disk) is not None:
            return
        archive = str(copy["archive"])
        failure = self._settled(archive)
        if failure is not None:
            raise RuntimeFailure(f"cannot copy its disk in: {failure}")
        if archive in self._jobs:
            raise Busy(f"loading its disk from {copy['from']}")
        if not Path(archive).exists():
            raise Busy(f"waiting for {copy['from']} to save its disk")
        self._jobs[archive] = self._pool.submit(self._load, archive, disk)
        raise Busy(f"loading its disk from {copy['from']}")

    def _settled(self, archive: str) -> str | None:
        """Forget the job on `archive` once it ended; why it failed, if it did."""
        job = self._jobs.get(archive)
        if job is None or not job.done():
            return None
        del self._jobs[archive]
        failure = job.exception()
        return None if failure is None else str(failure)

    def _save(self, image: str, archive: str) -> None:
        """On the pool's thread: `archive` complete, or not there at all."""
        if self.runtime.image_labels(image) is None:
            raise RuntimeFailure(f"the disk {image} is not on this host")
        name, part = move_ref(archive), f"{archive}.part"
        os.makedirs(os.path.dirname(archive), exist_ok=True)
        Path(part).unlink(missing_ok=True)  # a save cut short by the agent's end
        self.runtime.tag(image, name)
        try:
            self.runtime.save(name, part)
        finally:
            self.runtime.remove_image(name)  # the name only: the disk keeps its own
        os.replace(part, archive)
        if archive not in self._wanted:  # the move was given up while it was saved
            Path(archive).unlink()
            return
        self._saved.add(archive)
        log.info("saved the disk %s to %s for its move", image, archive)

    def _load(self, archive: str, disk: str) -> None:
        """On the pool's thread: the disk named `disk` here, from `archive` (then removed);
        not kept when no spec wants it any more (the move was given up meanwhile)."""
        loaded = self.runtime.load(archive)
        try:
            self.runtime.tag(loaded, disk)
        finally:
            self.runtime.remove_image(loaded)  # the move's name only
        Path(archive).unlink(missing_ok=True)
        if disk not in self._disks:
            self.runtime.remove_image(disk)
            return
        log.info("loaded the disk %s from %s", disk, archive)
