"""Persistent volumes on this host: one ext4 image per volume, mounted by loop, bind-mounted
read-write into the container that wants it (docs/dev/storage.md).

- An image is `<store>/<volume id>.ext4`: `store` is the data centre's shared storage path
  the control plane names in the spec, or this host's own volume folder. It is a sparse file
  of the volume's size made by `mkfs.ext4` (under a `.<random>.part` name, linked in place once
  whole: a crash mid-create leaves nothing that looks like a volume; `delete` sweeps such
  leftovers), so the size is enforced by the file system itself: writing past it fails with
  ENOSPC in the container, and no other volume or the host's own disk is touched.
- It is mounted (`mount -o loop,nodev,nosuid`) at `<mount_dir>/<volume id>` while a wanted
  container mounts it, and unmounted once none does. While mounted this agent holds an
  exclusive `fcntl` lock on the image, so a second host mounting the same shared image is
  refused ("in use on another host") rather than corrupting it; the lock dies with the agent
  while the mount lives on, so images on shared storage also carry ext4's multi-mount
  protection (the kernel's own refusal, "mounted on another host").
- A volume that held data before (`formatted` in the spec) whose image is missing is an
  error, never a fresh empty disk.
- `delete` removes an image whose volume the control plane deleted (unmounted first).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from cardhour.core.storage.volumes import DELETE_TASK
from cardhour.runtime.base import RuntimeFailure

log = logging.getLogger("cardhour.agent")
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
GIB = 1024**3
COMMAND_SECONDS = 120


class Busy(RuntimeFailure):
    """The volume is held elsewhere for now: try again, do not fail the container."""


class Volumes:
    """This host's volumes. `own_dir`: where volumes without a shared store live;
    `mount_dir`: where images are mounted (this host's, never shared)."""

    def __init__(self, own_dir: Path, mount_dir: Path) -> None:
        self.own_dir = Path(own_dir)
        self.mount_dir = Path(mount_dir)
        self._locks: dict[str, int] = {}  # volume id -> the image's open, locked descriptor

    def image(self, volume: dict[str, Any]) -> Path:
        vid = _checked_id(volume)
        store = volume.get("store")
        return (Path(str(store)) if store else self.own_dir) / f"{vid}.ext4"

    def mountpoint(self, vid: str) -> Path:
        return self.mount_dir / vid

    def attach(self, volume: dict[str, Any]) -> Path:
        """The volume mounted on this host (made first when new): its mountpoint.
        RuntimeFailure when its data is missing, another host holds it, or a tool fails."""
        vid = _checked_id(volume)
        image = self.image(volume)
        if not image.exists():
            if volume.get("formatted"):
                raise RuntimeFailure(
                    f"volume {vid}: its data is not on this host ({image} is missing)"
                )
            self._make(image, int(volume["size_gb"]), shared=bool(volume.get("store")))
        self._lock(vid, image)
        point = self.mountpoint(vid)
        if not _mounted(point):
            point.mkdir(parents=True, exist_ok=True)
            try:
                _run(["mount", "-o", "loop,nodev,nosuid", str(image), str(point)], f"mount {vid}")
            except RuntimeFailure as exc:
                if "already mounted" in str(exc):  # ext4's multi-mount protection said no
                    raise Busy(f"volume {vid} is mounted on another host; trying again") from None
                raise
            log.info("volume %s mounted at %s", vid, point)
        return point

    def release(self, in_use: dict[str, dict[str, Any]]) -> None:
        """Unmount every volume of this host no wanted container mounts (a busy one stays,
        tried again next pass); lock again the mounted ones in use that this agent does not
        hold yet (it restarted: the containers it adopted keep their mounts)."""
        mounted = {p.name for p in self._mounted_here()}
        for vid in sorted((mounted | set(self._locks)) - set(in_use)):
            try:
                self._unmount(vid)
            except RuntimeFailure as exc:
                log.warning("cannot release volume %s yet: %s", vid, exc)
        for vid in sorted((mounted & set(in_use)) - set(self._locks)):
            try:
                self._lock(vid, self.image(in_use[vid]))
                log.info("volume %s locked again: a container this agent adopted mounts it", vid)
            except (RuntimeFailure, OSError) as exc:
                log.warning("volume %s is mounted here but cannot be locked: %s", vid, exc)

    def delete(self, volume: dict[str, Any]) -> None:
        """Remove the volume's data (it is deleted): unmounted first; gone already is fine."""
        vid = _checked_id(volume)
        self._unmount(vid)
        image = self.image(volume)
        for path in (image, *image.parent.glob(f"{image.name}.*.part")):
            path.unlink(missing_ok=True)
        log.info("volume %s deleted (%s)", vid, image)

    def _make(self, image: Path, size_gb: int, shared: bool) -> None:
        """Make the image under a name of its own, then link it in place: on shared storage
        another host making the same volume at once wins or loses whole (the loser uses the
        winner's). An image on shared storage gets ext4's multi-mount protection (`mmp`):
        the kernel refuses to mount it while another host has it mounted, even one whose
        agent died (its lock went with it)."""
        image.parent.mkdir(parents=True, exist_ok=True)
        part = image.with_name(f"{image.name}.{uuid.uuid4().hex[:12]}.part")
        try:
            with open(part, "wb") as handle:
                handle.truncate(size_gb * GIB)  # sparse: only what is written takes disk
            features = ["-O", "mmp"] if shared else []
            _run(
                ["mkfs.ext4", "-q", "-F", "-m", "0", *features, "-E", "root_owner=0:0",
                 str(part)],
                f"make volume {image.stem}",
            )  # fmt: skip
            try:
                os.link(part, image)
            except FileExistsError:
                log.info("volume %s was made by another host at once: using it", image.stem)
                return
        finally:
            part.unlink(missing_ok=True)
        log.info("volume %s made: %d GiB at %s", image.stem, size_gb, image)

    def _lock(self, vid: str, image: Path) -> None:
        if vid in self._locks:
            return
        fd = os.open(image, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise Busy(
                f"volume {vid} is in use on another host (its last instance is still "
                "stopping there); trying again"
            ) from None
        self._locks[vid] = fd

    def _unmount(self, vid: str) -> None:
        point = self.mountpoint(vid)
        if _mounted(point):
            _run(["umount", str(point)], f"unmount {vid}")
            log.info("volume %s unmounted", vid)
        if point.is_dir():
            point.rmdir()
        fd = self._locks.pop(vid, None)
        if fd is not None:
            os.close(fd)  # the lock goes with it

    def _mounted_here(self) -> list[Path]:
        return [p for p in _mount_points() if p.parent == self.mount_dir]


def _checked_id(volume: dict[str, Any]) -> str:
    vid = str(volume.get("id", ""))
    if not _ID.fullmatch(vid):
        raise RuntimeFailure(f"bad volume id {vid[:70]!r}")
    return vid


def _mount_points() -> list[Path]:
    """Every mount point of this mount namespace (`/proc/self/mountinfo`, octal escapes
    undone)."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            field = line.split()[4]
            found.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)))
    return found


def _mounted(point: Path) -> bool:
    return point in _mount_points()


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeFailure(f"cannot {what}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeFailure(f"cannot {what}: {said[-1] if said else f'exit {done.returncode}'}")


def in_use(specs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The volumes the wanted containers of `specs` mount, by id."""
    return {
        str(v.get("id")): dict(v)
        for s in specs
        if s.get("kind") != DELETE_TASK
        for v in s.get("volumes") or ()
    }


def run_task(volumes: Volumes | None, spec: dict[str, Any]) -> dict[str, Any]:
    """Do a wanted task (`DELETE_TASK`) and report it as a container would: `exited` with code
    0 once done, `failed` with the reason."""
    report: dict[str, Any] = {"workload": str(spec["workload"])}
    try:
        if volumes is None:
            raise RuntimeFailure("this agent keeps no volumes")
        volumes.delete(dict(spec["volume"]))
    except (RuntimeFailure, OSError, KeyError, TypeError) as exc:
        return report | {"state": "failed", "error": str(exc)}
    return report | {"state": "exited", "exit_code": 0}
